#!/usr/bin/env bash
# skua compatibility suite: real clients over SASL listeners.
#   compat/sasl/sasl.sh SKUA_BINARY
#   compat/sasl/sasl.sh --skip REASON     every case reported as SKIP
# Prints one PASS/FAIL (or SKIP) line per case.
#
# One skua with two listeners: SASL_PLAINTEXT with PLAIN (users admin and alice in the
# listener's JAAS config, the inter-broker listener) and SASL_SSL with SCRAM-SHA-512 (a
# PEM keystore openssl makes). Kafka's kafka-configs.sh (`--command-config`, as admin over
# PLAIN) adds alice's SCRAM-SHA-512 credential; then the Java console tools, kcat and
# confluent-kafka-python (librdkafka), kafka-python, franz-go and kafkajs each produce and
# consume their records back in a consumer group over SASL_SSL with SCRAM-SHA-512 and over
# SASL_PLAINTEXT with PLAIN, and are refused cleanly with a wrong password. A third
# listener, OAUTH (SASL_PLAINTEXT), takes OAUTHBEARER tokens checked by Kafka's
# OAuthBearerValidatorCallbackHandler against a JWKS file: the Java tools log in with a
# JWT openssl signed (RS256), read by Kafka's OAuthBearerLoginCallbackHandler from a
# file: token endpoint; a token for another audience is refused.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../lib/common.sh"
source "$here/../lib/cases.sh"
source "$here/../lib/tls.sh"
SKUA=${1:?usage: sasl.sh SKUA_BINARY | --skip REASON}
export COMPAT_TOOL_TIMEOUT=${COMPAT_TOOL_TIMEOUT:-60}
BIN="$here/../bin"
VENV="${VENV:-$COMPAT_CACHE/venv}"
FRANZ="$COMPAT_CACHE/go/secure-client"
D=$(mktemp -d "${TMPDIR:-/tmp}/compat-sasl.XXXXXX")
PLAIN_PORT=$(free_port)
SSL_PORT=$(free_port)
OAUTH_PORT=$(free_port)
OAUTH_B=127.0.0.1:$OAUTH_PORT
PLAIN_B=127.0.0.1:$PLAIN_PORT
SSL_B=127.0.0.1:$SSL_PORT
PASS=compat-pass
skua_pid=""

CASES=(
  "sasl.java.kafka_configs_add_scram_user c_add_scram_user"
  "sasl.java.kafka_configs_scram_describe_delete c_scram_describe_delete"
  "sasl.java.scram_sasl_ssl_group_roundtrip c_java SASL_SSL"
  "sasl.java.plain_sasl_plaintext_group_roundtrip c_java SASL_PLAINTEXT"
  "sasl.java.wrong_password_refused c_java_refused"
  "sasl.java.oauthbearer_jwks_group_roundtrip c_java_oauth"
  "sasl.java.oauthbearer_wrong_audience_refused c_java_oauth_refused"
  "sasl.kcat.scram_sasl_ssl_roundtrip c_kcat SASL_SSL"
  "sasl.kcat.plain_sasl_plaintext_roundtrip c_kcat SASL_PLAINTEXT"
  "sasl.kcat.wrong_password_refused c_kcat_refused"
  "sasl.confluent-kafka.scram_sasl_ssl_group_roundtrip c_py confluent SASL_SSL roundtrip"
  "sasl.confluent-kafka.plain_sasl_plaintext_group_roundtrip c_py confluent SASL_PLAINTEXT roundtrip"
  "sasl.confluent-kafka.wrong_password_refused c_py confluent SASL_SSL refused"
  "sasl.kafka-python.scram_sasl_ssl_group_roundtrip c_py kafka-python SASL_SSL roundtrip"
  "sasl.kafka-python.plain_sasl_plaintext_group_roundtrip c_py kafka-python SASL_PLAINTEXT roundtrip"
  "sasl.kafka-python.wrong_password_refused c_py kafka-python SASL_PLAINTEXT refused"
  "sasl.franz-go.scram_sasl_ssl_group_roundtrip c_franz SASL_SSL roundtrip"
  "sasl.franz-go.plain_sasl_plaintext_group_roundtrip c_franz SASL_PLAINTEXT roundtrip"
  "sasl.franz-go.wrong_password_refused c_franz SASL_SSL refused"
  "sasl.kafkajs.scram_sasl_ssl_group_roundtrip c_kafkajs SASL_SSL roundtrip"
  "sasl.kafkajs.plain_sasl_plaintext_group_roundtrip c_kafkajs SASL_PLAINTEXT roundtrip"
  "sasl.kafkajs.wrong_password_refused c_kafkajs SASL_PLAINTEXT refused"
)
trap suite_cleanup EXIT

make_certs() {
  cd "$D" || return 1
  tls_ca ca "/CN=compat CA" || return 1
  tls_broker_cert || return 1
  # Kafka's client configs (--command-config, --producer.config, --consumer.config).
  local plain='org.apache.kafka.common.security.plain.PlainLoginModule required'
  local scram='org.apache.kafka.common.security.scram.ScramLoginModule required'
  printf 'security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=%s username="admin" password="admin-secret";\n' "$plain" >admin.properties
  printf 'security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=%s username="alice" password="alice-secret";\n' "$plain" >SASL_PLAINTEXT.properties
  printf 'security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config=%s username="alice" password="alice-scram";\nssl.truststore.type=PEM\nssl.truststore.location=%s/ca.pem\n' "$scram" "$D" >SASL_SSL.properties
  sed 's/alice-scram/not-the-password/' SASL_SSL.properties >wrong.properties
  make_tokens
}

b64url() { base64 -w0 | tr '+/' '-_' | tr -d '='; }
# An RS256 key, the JWKS that publishes it, and two JWTs it signs: one for audience
# kafka (oauth.jwt), one for another audience (other.jwt); with the Java client configs
# that read them through a file: token endpoint.
make_tokens() {
  openssl genrsa -out jwt.key 2048 || return 1
  local n; n=$(openssl rsa -in jwt.key -noout -modulus | cut -d= -f2 \
    | python3 -c 'import base64,sys; print(base64.urlsafe_b64encode(bytes.fromhex(sys.stdin.read().strip())).decode().rstrip("="))')
  printf '{"keys":[{"kty":"RSA","kid":"compat","use":"sig","alg":"RS256","n":"%s","e":"AQAB"}]}\n' "$n" >jwks.json
  local now aud h p sig; now=$(date +%s)
  h=$(printf '{"alg":"RS256","kid":"compat","typ":"JWT"}' | b64url)
  for aud in kafka other; do
    p=$(printf '{"sub":"alice","iss":"https://idp.compat","aud":"%s","iat":%d,"exp":%d,"scope":"kafka"}' \
      "$aud" "$now" $((now + 3600)) | b64url)
    sig=$(printf '%s.%s' "$h" "$p" | openssl dgst -sha256 -sign jwt.key -binary | b64url)
    [[ -n $sig ]] || return 1
    printf '%s.%s.%s' "$h" "$p" "$sig" >"$aud.jwt"
    printf 'security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\nsasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;\nsasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\nsasl.oauthbearer.token.endpoint.url=file://%s/%s.jwt\n' \
      "$D" "$aud" >"oauth-$aud.properties"
  done
}

start_skua() {
  "$SKUA" --override "listeners=SASL_PLAINTEXT://127.0.0.1:$PLAIN_PORT,SASL_SSL://127.0.0.1:$SSL_PORT,OAUTH://127.0.0.1:$OAUTH_PORT" \
    --override "advertised.listeners=SASL_PLAINTEXT://127.0.0.1:$PLAIN_PORT,SASL_SSL://127.0.0.1:$SSL_PORT,OAUTH://127.0.0.1:$OAUTH_PORT" \
    --override "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,OAUTH:SASL_PLAINTEXT" \
    --override "inter.broker.listener.name=SASL_PLAINTEXT" \
    --override "sasl.mechanism.inter.broker.protocol=PLAIN" \
    --override "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN" \
    --override 'listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";' \
    --override "listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512" \
    --override 'listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;' \
    --override "listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER" \
    --override 'listener.name.oauth.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;' \
    --override "listener.name.oauth.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler" \
    --override "listener.name.oauth.oauthbearer.sasl.oauthbearer.jwks.endpoint.url=file://$D/jwks.json" \
    --override "sasl.oauthbearer.expected.audience=kafka" \
    --override "sasl.oauthbearer.expected.issuer=https://idp.compat" \
    --override "ssl.keystore.type=PKCS12" \
    --override "ssl.keystore.location=$D/broker.p12" \
    --override "ssl.keystore.password=$PASS" \
    --override "group.initial.rebalance.delay.ms=0" \
    --override "log.dirs=$D/data" >"$D/broker.log" 2>&1 &
  skua_pid=$!
  wait_port 127.0.0.1 "$PLAIN_PORT" 60 "$skua_pid"
}

bootstrap_of() { [[ $1 == SASL_SSL ]] && echo "$SSL_B" || echo "$PLAIN_B"; }
mechanism_of() { [[ $1 == SASL_SSL ]] && echo SCRAM-SHA-512 || echo PLAIN; }
password_of() { [[ $1 == SASL_SSL ]] && echo alice-scram || echo alice-secret; }

configs_() { "$BIN/kafka-configs.sh" --bootstrap-server "$PLAIN_B" --command-config "$D/admin.properties" "$@"; }
# alice's SCRAM-SHA-512 credential (AlterUserScramCredentials), described back
# (DescribeUserScramCredentials); the SCRAM cases that follow log in with it.
c_add_scram_user() {
  configs_ --alter --add-config 'SCRAM-SHA-512=[iterations=8192,password=alice-scram]' \
    --entity-type users --entity-name alice >"$CASE_TMP/out" || return 1
  cat "$CASE_TMP/out"
  grep -q 'Completed updating config for user alice' "$CASE_TMP/out" || fail "not updated: $(head -c 200 "$CASE_TMP/out")" || return 1
  configs_ --describe --entity-type users --entity-name alice >"$CASE_TMP/described" || return 1
  cat "$CASE_TMP/described"
  grep -qxF "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=8192" "$CASE_TMP/described" \
    || fail "alice's credential not described: $(head -c 300 "$CASE_TMP/described")"
}
# A user with both mechanisms' credentials, described back, then each deleted in turn and
# described again.
c_scram_describe_delete() {
  local u; u=$(uniq_name scram)
  configs_ --alter --add-config 'SCRAM-SHA-256=[iterations=4096,password=bob-scram],SCRAM-SHA-512=[iterations=5000,password=bob-scram]' \
    --entity-type users --entity-name "$u" >/dev/null || return 1
  scram_described_as "$u" "SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=5000" || return 1
  configs_ --alter --delete-config SCRAM-SHA-256 --entity-type users --entity-name "$u" >/dev/null || return 1
  scram_described_as "$u" "SCRAM-SHA-512=iterations=5000" || return 1
  configs_ --alter --delete-config SCRAM-SHA-512 --entity-type users --entity-name "$u" >/dev/null || return 1
  scram_described_as "$u" ""
}
scram_described_as() { # USER CREDENTIALS ("": none)
  configs_ --describe --entity-type users --entity-name "$1" >"$CASE_TMP/described" || return 1
  cat "$CASE_TMP/described"
  if [[ -z $2 ]]; then
    ! grep -q 'SCRAM' "$CASE_TMP/described" || fail "deleted credentials still described: $(grep SCRAM "$CASE_TMP/described")"
  else
    grep -qxF "SCRAM credential configs for user-principal '$1' are $2" "$CASE_TMP/described" \
      || fail "not described as $2: $(head -c 300 "$CASE_TMP/described")"
  fi
}
c_java() { # PROTOCOL
  local t g; t=$(uniq_name sasl-java); g=$(uniq_name sasl-group)
  local b; b=$(bootstrap_of "$1")
  for i in $(seq 1 20); do printf 'key-%d:java value %d\n' "$i" "$i"; done >"$CASE_TMP/in"
  "$BIN/kafka-console-producer.sh" --bootstrap-server "$b" --topic "$t" \
    --producer.config "$D/$1.properties" \
    --property parse.key=true --property key.separator=: <"$CASE_TMP/in" || return 1
  "$BIN/kafka-console-consumer.sh" --bootstrap-server "$b" --topic "$t" --group "$g" \
    --consumer.config "$D/$1.properties" --from-beginning --max-messages 20 --timeout-ms 30000 \
    --property print.key=true --property key.separator=: >"$CASE_TMP/out" || return 1
  diff "$CASE_TMP/in" "$CASE_TMP/out" >"$CASE_TMP/diff" \
    || fail "consumed records differ: $(head -c 300 "$CASE_TMP/diff" | tr '\n' ' ')"
}
c_java_refused() {
  if COMPAT_TOOL_TIMEOUT=40 "$BIN/kafka-topics.sh" --bootstrap-server "$SSL_B" \
    --command-config "$D/wrong.properties" --list >"$CASE_TMP/out" 2>&1; then
    fail "topics listed with a wrong password"; return 1
  fi
  cat "$CASE_TMP/out"
  grep -q 'SaslAuthenticationException' "$CASE_TMP/out" \
    || fail "no SaslAuthenticationException: $(head -c 200 "$CASE_TMP/out")"
}
# Kafka 4's clients read a token endpoint only from the URLs this property allows.
oauth_opts() { echo "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=file://$D/$1.jwt"; }
c_java_oauth() {
  local t g; t=$(uniq_name sasl-oauth); g=$(uniq_name sasl-oauth-group)
  for i in $(seq 1 20); do printf 'key-%d:oauth value %d\n' "$i" "$i"; done >"$CASE_TMP/in"
  KAFKA_OPTS=$(oauth_opts kafka) "$BIN/kafka-console-producer.sh" --bootstrap-server "$OAUTH_B" --topic "$t" \
    --producer.config "$D/oauth-kafka.properties" \
    --property parse.key=true --property key.separator=: <"$CASE_TMP/in" || return 1
  KAFKA_OPTS=$(oauth_opts kafka) "$BIN/kafka-console-consumer.sh" --bootstrap-server "$OAUTH_B" --topic "$t" --group "$g" \
    --consumer.config "$D/oauth-kafka.properties" --from-beginning --max-messages 20 --timeout-ms 30000 \
    --property print.key=true --property key.separator=: >"$CASE_TMP/out" || return 1
  diff "$CASE_TMP/in" "$CASE_TMP/out" >"$CASE_TMP/diff" \
    || fail "consumed records differ: $(head -c 300 "$CASE_TMP/diff" | tr '\n' ' ')"
}
c_java_oauth_refused() {
  if KAFKA_OPTS=$(oauth_opts other) COMPAT_TOOL_TIMEOUT=40 "$BIN/kafka-topics.sh" --bootstrap-server "$OAUTH_B" \
    --command-config "$D/oauth-other.properties" --list >"$CASE_TMP/out" 2>&1; then
    fail "topics listed with a token for another audience"; return 1
  fi
  cat "$CASE_TMP/out"
  grep -q 'SaslAuthenticationException: {"status":"invalid_token"}' "$CASE_TMP/out" \
    || fail "no invalid_token challenge: $(head -c 200 "$CASE_TMP/out")"
}
kcat_() { # PROTOCOL PASSWORD ARGS...
  local p=$1 pw=$2; shift 2
  local tls=(); [[ $p == SASL_SSL ]] && tls=(-X "ssl.ca.location=$D/ca.pem")
  timeout -k 5 45 kcat -b "$(bootstrap_of "$p")" -X socket.timeout.ms=20000 -X "security.protocol=$p" \
    -X "sasl.mechanisms=$(mechanism_of "$p")" -X sasl.username=alice -X "sasl.password=$pw" "${tls[@]}" "$@"
}
c_kcat() { # PROTOCOL
  local t; t=$(uniq_name sasl-kcat)
  for i in $(seq 1 100); do printf 'key-%d|value %d over %s\n' "$i" "$i" "$1"; done >"$CASE_TMP/in"
  kcat_ "$1" "$(password_of "$1")" -P -t "$t" -p 0 -K '|' -l "$CASE_TMP/in" || return 1
  kcat_ "$1" "$(password_of "$1")" -C -t "$t" -p 0 -o beginning -e -q -f '%k|%s\n' >"$CASE_TMP/out" || return 1
  diff "$CASE_TMP/in" "$CASE_TMP/out" >"$CASE_TMP/diff" \
    || fail "consumed records differ: $(head -c 300 "$CASE_TMP/diff" | tr '\n' ' ')"
}
c_kcat_refused() {
  if kcat_ SASL_SSL wrong-password -m 3 -L >"$CASE_TMP/out" 2>&1; then fail "metadata answered with a wrong password"; return 1; fi
  cat "$CASE_TMP/out"
  grep -Eqi 'authentication|SASL' "$CASE_TMP/out" || fail "no SASL error reported: $(head -c 200 "$CASE_TMP/out")"
}
# The settings compat/python/secure_clients.py, compat/go/secureclient and
# compat/node/kafkajs-secure.js take, as KEY=VALUE: alice over PROTOCOL, with a wrong
# password when MODE is refused.
client_conf() { # PROTOCOL MODE
  local pw; pw=$(password_of "$1"); [[ $2 == refused ]] && pw=wrong-password
  echo "security.protocol=$1" "sasl.mechanism=$(mechanism_of "$1")" sasl.username=alice "sasl.password=$pw"
  [[ $1 == SASL_SSL ]] && echo "ssl.ca.location=$D/ca.pem"
}
c_py() { # LIBRARY PROTOCOL MODE
  # shellcheck disable=SC2046  # one word per setting
  timeout -k 5 60 "$VENV/bin/python" "$here/../python/secure_clients.py" "$1" "$(bootstrap_of "$2")" \
    "$(uniq_name "sasl-$1")" "$3" $(client_conf "$2" "$3")
}
c_franz() { # PROTOCOL MODE
  # shellcheck disable=SC2046
  timeout -k 5 60 "$FRANZ" "$(bootstrap_of "$1")" "$(uniq_name sasl-franz)" "$2" $(client_conf "$1" "$2")
}
c_kafkajs() { # PROTOCOL MODE
  # shellcheck disable=SC2046
  timeout -k 5 60 node "$here/../node/kafkajs-secure.js" "$(bootstrap_of "$1")" "$(uniq_name sasl-kafkajs)" "$2" $(client_conf "$1" "$2")
}

if [[ $SKUA == --skip ]]; then
  report_all SKIP "${2:-not run}"
  exit 0
fi
if ! out=$(make_certs 2>&1); then
  report_all FAIL "could not make the certificates: $(tail -n 3 <<<"$out" | tr '\n' ' ')"
  exit 0
fi
if ! start_skua; then
  report_all FAIL "skua did not start with SASL listeners: $(tail -n 5 "$D/broker.log" | tr '\n' ' ')"
  exit 0
fi
for c in "${CASES[@]}"; do
  # shellcheck disable=SC2086  # "ID FUNCTION ARGS"
  run_case $c
done
if grep -Eq 'admin-secret|alice-secret|alice-scram|bob-scram|not-the-password|wrong-password' "$D/broker.log"; then
  echo "FAIL sasl.broker_log_holds_no_secret: a password is in the broker's log"
else
  echo "PASS sasl.broker_log_holds_no_secret"
fi
exit 0
