#!/usr/bin/env bash
# skua compatibility suite: real clients over an SSL listener with client certificates.
#   compat/ssl/ssl.sh SKUA_BINARY
#   compat/ssl/ssl.sh --skip REASON     every case reported as SKIP
# Prints one PASS/FAIL (or SKIP) line per case.
#
# openssl makes a CA, a broker certificate (127.0.0.1, localhost) and a client certificate
# (CN=compat-client,OU=clients,O=skua); keytool puts them in PKCS12 stores for Java. skua
# starts with `listeners=SSL://...`, a PKCS12 keystore, a PEM truststore and
# `ssl.client.auth=required`. kcat (librdkafka) with the PEM files and Kafka's console
# tools (the Java client) with the PKCS12 stores each produce and consume their records
# back (the Java consumer in a group); so do confluent-kafka-python (librdkafka),
# kafka-python, franz-go and kafkajs with the PEM files, each in a consumer group (the
# sasl suite's client programs: compat/python/secure_clients.py, compat/go/secureclient,
# compat/node/kafkajs-secure.js). Each client is refused cleanly without a certificate;
# librdkafka (kcat and confluent-kafka), kafka-python, franz-go and kafkajs also with a
# certificate from another CA (CN=stranger, signed by a CA the broker does not trust).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../lib/common.sh"
source "$here/../lib/cases.sh"
source "$here/../lib/tls.sh"
SKUA=${1:?usage: ssl.sh SKUA_BINARY | --skip REASON}
export COMPAT_TOOL_TIMEOUT=${COMPAT_TOOL_TIMEOUT:-60}
BIN="$here/../bin"
VENV="${VENV:-$COMPAT_CACHE/venv}"
FRANZ="$COMPAT_CACHE/go/secure-client"
D=$(mktemp -d "${TMPDIR:-/tmp}/compat-ssl.XXXXXX")
PORT=$(free_port)
B=127.0.0.1:$PORT
PASS=compat-pass
skua_pid=""

CASES=(
  "ssl.kcat.produce_consume c_kcat_roundtrip"
  "ssl.kcat.no_certificate_refused c_kcat_refused"
  "ssl.java.console_group_roundtrip c_java_roundtrip"
  "ssl.java.no_certificate_refused c_java_refused"
  "ssl.kcat.other_ca_certificate_refused c_kcat_refused stranger"
  "ssl.confluent-kafka.group_roundtrip c_client py-confluent roundtrip client"
  "ssl.confluent-kafka.no_certificate_refused c_client py-confluent refused none"
  "ssl.confluent-kafka.other_ca_certificate_refused c_client py-confluent refused stranger"
  "ssl.kafka-python.group_roundtrip c_client py-kafka-python roundtrip client"
  "ssl.kafka-python.no_certificate_refused c_client py-kafka-python refused none"
  "ssl.kafka-python.other_ca_certificate_refused c_client py-kafka-python refused stranger"
  "ssl.franz-go.group_roundtrip c_client franz roundtrip client"
  "ssl.franz-go.no_certificate_refused c_client franz refused none"
  "ssl.franz-go.other_ca_certificate_refused c_client franz refused stranger"
  "ssl.kafkajs.group_roundtrip c_client kafkajs roundtrip client"
  "ssl.kafkajs.no_certificate_refused c_client kafkajs refused none"
  "ssl.kafkajs.other_ca_certificate_refused c_client kafkajs refused stranger"
)
trap suite_cleanup EXIT

make_certs() {
  cd "$D" || return 1
  tls_ca ca "/CN=compat CA" || return 1
  tls_broker_cert || return 1
  tls_client_cert client "/O=skua/OU=clients/CN=compat-client" || return 1
  tls_truststore || return 1
  cat >client.properties <<PROPS
security.protocol=SSL
ssl.truststore.type=PKCS12
ssl.truststore.location=$D/trust.p12
ssl.truststore.password=$PASS
ssl.keystore.type=PKCS12
ssl.keystore.location=$D/client.p12
ssl.keystore.password=$PASS
PROPS
  grep -v '^ssl.keystore' client.properties >anonymous.properties
  # A client certificate from a CA the broker does not trust.
  tls_ca other-ca "/CN=other CA" || return 1
  tls_client_cert stranger "/CN=stranger" other-ca
}

start_skua() {
  "$SKUA" --override "listeners=SSL://127.0.0.1:$PORT" \
    --override "advertised.listeners=SSL://127.0.0.1:$PORT" \
    --override "security.inter.broker.protocol=SSL" \
    --override "ssl.keystore.type=PKCS12" \
    --override "ssl.keystore.location=$D/broker.p12" \
    --override "ssl.keystore.password=$PASS" \
    --override "ssl.truststore.type=PEM" \
    --override "ssl.truststore.location=$D/ca.pem" \
    --override "ssl.client.auth=required" \
    --override "group.initial.rebalance.delay.ms=0" \
    --override "log.dirs=$D/data" >"$D/broker.log" 2>&1 &
  skua_pid=$!
  wait_port 127.0.0.1 "$PORT" 60 "$skua_pid"
}

KCAT_TLS=(-X security.protocol=ssl -X "ssl.ca.location=$D/ca.pem")
KCAT_CERT=(-X "ssl.certificate.location=$D/client.pem" -X "ssl.key.location=$D/client.key")
kcat_() { timeout -k 5 45 kcat -b "$B" -X socket.timeout.ms=20000 "${KCAT_TLS[@]}" "$@"; }

c_kcat_roundtrip() {
  local t; t=$(uniq_name ssl-kcat)
  for i in $(seq 1 100); do printf 'key-%d|value %d over tls\n' "$i" "$i"; done >"$CASE_TMP/in"
  # The first produce creates the topic (auto.create.topics.enable).
  kcat_ "${KCAT_CERT[@]}" -P -t "$t" -p 0 -K '|' -l "$CASE_TMP/in" || return 1
  kcat_ "${KCAT_CERT[@]}" -C -t "$t" -p 0 -o beginning -e -q -f '%k|%s\n' >"$CASE_TMP/out" || return 1
  diff "$CASE_TMP/in" "$CASE_TMP/out" >"$CASE_TMP/diff" \
    || fail "consumed records differ: $(head -c 300 "$CASE_TMP/diff" | tr '\n' ' ')"
}
c_kcat_refused() { # [CERTIFICATE: none (the default) or stranger]
  local cert=()
  [[ ${1:-none} == stranger ]] && cert=(-X "ssl.certificate.location=$D/stranger.pem" -X "ssl.key.location=$D/stranger.key")
  if kcat_ "${cert[@]}" -m 4 -L >"$CASE_TMP/out" 2>&1; then fail "metadata answered without a client certificate"; return 1; fi
  cat "$CASE_TMP/out"
  grep -Eqi 'alert|certificate|handshake' "$CASE_TMP/out" \
    || fail "no TLS error reported: $(head -c 200 "$CASE_TMP/out")"
}
c_java_roundtrip() {
  local t g; t=$(uniq_name ssl-java); g=$(uniq_name ssl-group)
  for i in $(seq 1 20); do printf 'key-%d:java value %d\n' "$i" "$i"; done >"$CASE_TMP/in"
  "$BIN/kafka-topics.sh" --bootstrap-server "$B" --command-config "$D/client.properties" \
    --create --topic "$t" --partitions 1 --replication-factor 1 >/dev/null || return 1
  "$BIN/kafka-console-producer.sh" --bootstrap-server "$B" --topic "$t" \
    --producer.config "$D/client.properties" \
    --property parse.key=true --property key.separator=: <"$CASE_TMP/in" || return 1
  "$BIN/kafka-console-consumer.sh" --bootstrap-server "$B" --topic "$t" --group "$g" \
    --consumer.config "$D/client.properties" --from-beginning --max-messages 20 --timeout-ms 30000 \
    --property print.key=true --property key.separator=: >"$CASE_TMP/out" || return 1
  diff "$CASE_TMP/in" "$CASE_TMP/out" >"$CASE_TMP/diff" \
    || fail "consumed records differ: $(head -c 300 "$CASE_TMP/diff" | tr '\n' ' ')"
}
c_java_refused() {
  if COMPAT_TOOL_TIMEOUT=40 "$BIN/kafka-topics.sh" --bootstrap-server "$B" \
    --command-config "$D/anonymous.properties" --list >"$CASE_TMP/out" 2>&1; then
    fail "topics listed without a client certificate"; return 1
  fi
  cat "$CASE_TMP/out"
  grep -Eqi 'ssl|handshake|certificate|authentication|timed out' "$CASE_TMP/out" \
    || fail "no TLS error reported: $(head -c 200 "$CASE_TMP/out")"
}

# The sasl suite's client programs, with PEM files: CERTIFICATE is client (the broker's
# CA signed it), stranger (another CA did) or none.
c_client() { # CLIENT MODE CERTIFICATE
  local conf=(security.protocol=SSL "ssl.ca.location=$D/ca.pem")
  [[ $3 != none ]] && conf+=("ssl.certificate.location=$D/$3.pem" "ssl.key.location=$D/$3.key")
  local t; t=$(uniq_name "ssl-$1")
  case $1 in
    py-*) timeout -k 5 60 "$VENV/bin/python" "$here/../python/secure_clients.py" "${1#py-}" "$B" "$t" "$2" "${conf[@]}" ;;
    franz) timeout -k 5 60 "$FRANZ" "$B" "$t" "$2" "${conf[@]}" ;;
    kafkajs) timeout -k 5 60 node "$here/../node/kafkajs-secure.js" "$B" "$t" "$2" "${conf[@]}" ;;
  esac
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
  report_all FAIL "skua did not start with an SSL listener: $(tail -n 5 "$D/broker.log" | tr '\n' ' ')"
  exit 0
fi
for c in "${CASES[@]}"; do
  # shellcheck disable=SC2086  # "ID FUNCTION"
  run_case $c
done
exit 0
