#!/usr/bin/env bash
# skua compatibility suite: ACLs and client quotas with Kafka's own tools, the Java client
# and librdkafka.
#   compat/acls/acls.sh SKUA_BINARY
#   compat/acls/acls.sh --skip REASON     every case reported as SKIP
# Prints one PASS/FAIL (or SKIP) line per case.
#
# openssl makes a CA, a broker certificate and three client certificates: the admin
# (CN=compat-admin, a super user), a client (CN=compat-client,OU=clients,O=skua) and a
# quota user (CN=compat-quota).
# skua starts with an SSL listener requiring client certificates and Kafka's
# StandardAuthorizer (`authorizer.class.name`, `super.users`). kafka-acls.sh adds, lists
# and removes ACLs as the admin; the Java console producer and consumer run as the client,
# refused with Kafka's authorization errors until the admin's ACLs allow them, and again
# once the ACLs are removed. confluent-kafka-python's AdminClient (librdkafka's ACL API,
# compat/acls/librdkafka_acls.py) creates, describes (LITERAL, PREFIXED, MATCH and ANY
# filters) and deletes ACLs, each binding checked field by field, and a librdkafka
# producer and consumer group are refused, then allowed, by them. kafka-configs.sh adds,
# describes and deletes client quotas (producer_byte_rate, consumer_byte_rate,
# request_percentage) for a user, a client id, a user + client id and the defaults; a
# Java producer (kafka-producer-perf-test) as the quota user, under its user's
# producer_byte_rate averages within 20 % of it and reports a
# produce-throttle-time-avg above 0.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../lib/common.sh"
source "$here/../lib/cases.sh"
source "$here/../lib/tls.sh"
SKUA=${1:?usage: acls.sh SKUA_BINARY | --skip REASON}
export COMPAT_TOOL_TIMEOUT=${COMPAT_TOOL_TIMEOUT:-60}
BIN="$here/../bin"
VENV="${VENV:-$COMPAT_CACHE/venv}"
D=$(mktemp -d "${TMPDIR:-/tmp}/compat-acls.XXXXXX")
PORT=$(free_port)
B=127.0.0.1:$PORT
PASS=compat-pass
CLIENT="User:CN=compat-client,OU=clients,O=skua"
skua_pid=""

CASES=(
  "acls.kafka_acls.add_list_remove c_add_list_remove"
  "acls.java.producer_denied_then_allowed c_producer"
  "acls.java.consumer_group_denied_then_allowed c_consumer"
  "acls.confluent-kafka.admin_api_filters c_librdkafka admin_api"
  "acls.confluent-kafka.producer_consumer_denied_then_allowed c_librdkafka denied_then_allowed"
  "acls.kafka_configs.quotas_add_describe_delete c_quotas"
  "acls.java.producer_quota_throttled c_producer_quota"
)
trap suite_cleanup EXIT

client_cert() { # NAME SUBJECT
  tls_client_cert "$1" "$2" || return 1
  cat >"$1.properties" <<PROPS
security.protocol=SSL
ssl.truststore.type=PKCS12
ssl.truststore.location=$D/trust.p12
ssl.truststore.password=$PASS
ssl.keystore.type=PKCS12
ssl.keystore.location=$D/$1.p12
ssl.keystore.password=$PASS
PROPS
}

make_certs() {
  cd "$D" || return 1
  tls_ca ca "/CN=compat CA" || return 1
  tls_broker_cert || return 1
  tls_truststore || return 1
  client_cert admin "/CN=compat-admin" || return 1
  client_cert client "/O=skua/OU=clients/CN=compat-client" || return 1
  client_cert quota "/CN=compat-quota" || return 1
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
    --override "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer" \
    --override "super.users=User:CN=compat-admin" \
    --override "quota.window.num=2" \
    --override "group.initial.rebalance.delay.ms=0" \
    --override "log.dirs=$D/data" >"$D/broker.log" 2>&1 &
  skua_pid=$!
  wait_port 127.0.0.1 "$PORT" 60 "$skua_pid"
}

acls_() { "$BIN/kafka-acls.sh" --bootstrap-server "$B" --command-config "$D/admin.properties" "$@"; }
topic_as_admin() { # TOPIC
  "$BIN/kafka-topics.sh" --bootstrap-server "$B" --command-config "$D/admin.properties" \
    --create --topic "$1" --partitions 1 --replication-factor 1 >/dev/null
}
produce_as_client() { # TOPIC INPUT
  "$BIN/kafka-console-producer.sh" --bootstrap-server "$B" --topic "$1" \
    --producer.config "$D/client.properties" --producer-property max.block.ms=10000 \
    --producer-property delivery.timeout.ms=15000 --producer-property request.timeout.ms=10000 <"$2"
}

c_add_list_remove() {
  local t; t=$(uniq_name acl-cli)
  acls_ --add --allow-principal "$CLIENT" --operation Read --operation Write --topic "$t" || return 1
  acls_ --add --deny-principal "User:*" --allow-host '*' --operation Delete --topic "$t" --resource-pattern-type prefixed || return 1
  acls_ --list --topic "$t" --resource-pattern-type any >"$CASE_TMP/list" || return 1
  cat "$CASE_TMP/list"
  grep -q "principal=$CLIENT, host=\*, operation=READ, permissionType=ALLOW" "$CASE_TMP/list" \
    || fail "READ for the client not listed: $(head -c 400 "$CASE_TMP/list" | tr '\n' ' ')" || return 1
  grep -q "principal=$CLIENT, host=\*, operation=WRITE, permissionType=ALLOW" "$CASE_TMP/list" \
    || fail "WRITE for the client not listed" || return 1
  grep -q "patternType=PREFIXED" "$CASE_TMP/list" || fail "the prefixed DENY not listed" || return 1
  acls_ --remove --force --topic "$t" || return 1
  acls_ --remove --force --topic "$t" --resource-pattern-type prefixed || return 1
  acls_ --list --topic "$t" --resource-pattern-type any >"$CASE_TMP/after" || return 1
  if grep -q "principal=" "$CASE_TMP/after"; then fail "ACLs left after --remove: $(head -c 300 "$CASE_TMP/after")"; fi
}

c_producer() {
  local t; t=$(uniq_name acl-produce)
  topic_as_admin "$t" || return 1
  printf 'a\nb\nc\n' >"$CASE_TMP/in"
  # The console producer logs a failed send and still exits 0: its output tells.
  produce_as_client "$t" "$CASE_TMP/in" >"$CASE_TMP/denied" 2>&1
  cat "$CASE_TMP/denied"
  grep -Eq 'TopicAuthorizationException|Not authorized to access topics' "$CASE_TMP/denied" \
    || fail "no authorization error: $(grep -m3 -i 'exception\|error' "$CASE_TMP/denied" | tr '\n' ' ' | head -c 400)" || return 1
  acls_ --add --allow-principal "$CLIENT" --producer --topic "$t" >/dev/null || return 1
  produce_as_client "$t" "$CASE_TMP/in" >"$CASE_TMP/allowed" 2>&1 || return 1
  cat "$CASE_TMP/allowed"
  if grep -Eqi 'exception|error' "$CASE_TMP/allowed"; then
    fail "the client could not produce with the ACL: $(grep -m3 -i 'exception\|error' "$CASE_TMP/allowed" | tr '\n' ' ' | head -c 400)"; return 1
  fi
  "$BIN/kafka-get-offsets.sh" --bootstrap-server "$B" --command-config "$D/admin.properties" \
    --topic "$t" >"$CASE_TMP/offsets" || return 1
  grep -q ":0:3$" "$CASE_TMP/offsets" || fail "3 records expected: $(cat "$CASE_TMP/offsets")"
}

c_consumer() {
  local t g; t=$(uniq_name acl-consume); g=$(uniq_name acl-group)
  topic_as_admin "$t" || return 1
  for i in $(seq 1 10); do printf 'value %d\n' "$i"; done >"$CASE_TMP/in"
  "$BIN/kafka-console-producer.sh" --bootstrap-server "$B" --topic "$t" \
    --producer.config "$D/admin.properties" <"$CASE_TMP/in" || return 1
  consume() {
    "$BIN/kafka-console-consumer.sh" --bootstrap-server "$B" --topic "$t" --group "$g" \
      --consumer.config "$D/client.properties" --from-beginning --max-messages 10 --timeout-ms 20000
  }
  # READ on the topic but not on the group: refused with the group's error.
  acls_ --add --allow-principal "$CLIENT" --operation Read --operation Describe --topic "$t" >/dev/null || return 1
  consume >"$CASE_TMP/denied" 2>&1
  cat "$CASE_TMP/denied"
  grep -Eq 'GroupAuthorizationException|Not authorized to access group' "$CASE_TMP/denied" \
    || fail "no group authorization error: $(grep -m3 -i 'exception\|error' "$CASE_TMP/denied" | tr '\n' ' ' | head -c 400)" || return 1
  acls_ --add --allow-principal "$CLIENT" --operation Read --group "$g" >/dev/null || return 1
  consume >"$CASE_TMP/out" 2>"$CASE_TMP/err" \
    || fail "could not consume with the ACLs: $(grep -m3 -i 'exception\|error' "$CASE_TMP/err" | tr '\n' ' ' | head -c 400)" || return 1
  diff "$CASE_TMP/in" "$CASE_TMP/out" >"$CASE_TMP/diff" \
    || fail "consumed records differ: $(head -c 300 "$CASE_TMP/diff" | tr '\n' ' ')" || return 1
  # The topic's ACLs removed: refused again.
  acls_ --remove --force --topic "$t" >/dev/null || return 1
  consume >"$CASE_TMP/again" 2>&1
  cat "$CASE_TMP/again"
  grep -Eq 'TopicAuthorizationException|Not authorized to access topics' "$CASE_TMP/again" \
    || fail "no topic authorization error once the topic's ACLs were removed"
}

c_librdkafka() { # CASE (compat/acls/librdkafka_acls.py)
  timeout -k 5 60 "$VENV/bin/python" "$here/librdkafka_acls.py" "$1" "$B" "$D"
}

configs_() { "$BIN/kafka-configs.sh" --bootstrap-server "$B" --command-config "$D/admin.properties" "$@"; }
# Client quotas through AlterClientQuotas and DescribeClientQuotas as Kafka's tool sends
# them (a user's quotas for its client ids' default are java.configs.quotas'): each entity
# kind gets its own values, described back line by line as the tool
# prints them, then deleted and no longer described. The defaults apply to every client
# of this broker (the admin too), so theirs are far above any rate the suite reaches.
describe_all() { # every user's, client id's and user + client id's quotas, side by side
  configs_ --describe --entity-type users >"$CASE_TMP/d-users" 2>&1 & local a=$!
  configs_ --describe --entity-type clients >"$CASE_TMP/d-clients" 2>&1 & local b=$!
  configs_ --describe --entity-type users --entity-type clients >"$CASE_TMP/d-both" 2>&1 & local c=$!
  wait $a && wait $b && wait $c || { head -c 300 "$CASE_TMP"/d-*; return 1; }
  cat "$CASE_TMP/d-users" "$CASE_TMP/d-clients" "$CASE_TMP/d-both"
}
c_quotas() {
  local u c k
  u=$(uniq_name quser) c=$(uniq_name qclient)
  local -A entity=(
    [user]="--entity-type users --entity-name $u"
    [client]="--entity-type clients --entity-name $c"
    [user_client]="--entity-type users --entity-name $u --entity-type clients --entity-name $c"
    [default_user]="--entity-type users --entity-default"
    [default_client]="--entity-type clients --entity-default"
    [default_user_default_client]="--entity-type users --entity-default --entity-type clients --entity-default"
  )
  local -A values=(
    [user]="producer_byte_rate=1024,consumer_byte_rate=2048,request_percentage=50"
    [client]="producer_byte_rate=1025,consumer_byte_rate=2049,request_percentage=51"
    [user_client]="producer_byte_rate=1026,consumer_byte_rate=2050,request_percentage=52"
    [default_user]="producer_byte_rate=1073741824,consumer_byte_rate=1073741825,request_percentage=1000"
    [default_client]="consumer_byte_rate=1073741826"
    [default_user_default_client]="producer_byte_rate=1073741827,request_percentage=1001"
  )
  # The tool once per entity, side by side (each is mostly a JVM starting).
  local -A pid=()
  for k in "${!entity[@]}"; do
    # shellcheck disable=SC2086  # the entity's options, one word each
    configs_ --alter --add-config "${values[$k]}" ${entity[$k]} >"$CASE_TMP/add-$k" 2>&1 & pid[$k]=$!
  done
  for k in "${!pid[@]}"; do
    wait "${pid[$k]}" || { fail "could not add $k's quotas: $(head -c 200 "$CASE_TMP/add-$k")"; return 1; }
  done
  describe_all >"$CASE_TMP/described" || return 1
  cat "$CASE_TMP/described"
  cat >"$CASE_TMP/want" <<WANT
Quota configs for user-principal '$u' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0, request_percentage=50.0
Quota configs for client-id '$c' are consumer_byte_rate=2049.0, producer_byte_rate=1025.0, request_percentage=51.0
Quota configs for user-principal '$u', client-id '$c' are consumer_byte_rate=2050.0, producer_byte_rate=1026.0, request_percentage=52.0
Quota configs for the default user-principal are consumer_byte_rate=1.073741825E9, producer_byte_rate=1.073741824E9, request_percentage=1000.0
Quota configs for the default client-id are consumer_byte_rate=1.073741826E9
Quota configs for the default user-principal, the default client-id are producer_byte_rate=1.073741827E9, request_percentage=1001.0
WANT
  local line
  while IFS= read -r line; do
    grep -qxF "$line" "$CASE_TMP/described" || { fail "not described: $line"; return 1; }
  done <"$CASE_TMP/want"
  for k in "${!entity[@]}"; do
    # shellcheck disable=SC2086
    configs_ --alter --delete-config "$(sed 's/=[^,]*//g' <<<"${values[$k]}")" ${entity[$k]} >"$CASE_TMP/delete-$k" 2>&1 & pid[$k]=$!
  done
  for k in "${!pid[@]}"; do
    wait "${pid[$k]}" || { fail "could not delete $k's quotas: $(head -c 200 "$CASE_TMP/delete-$k")"; return 1; }
  done
  describe_all >"$CASE_TMP/after" || return 1
  if grep -E "$u|$c|default" "$CASE_TMP/after"; then fail "quotas described after their deletion: $(grep -E "$u|$c|default" "$CASE_TMP/after" | head -c 300)"; fi
}

# A Java producer over its user's producer_byte_rate (the principal of its certificate):
# its whole run averages within 20 % of the quota (the broker runs with quota.window.num=2,
# so a new rate's allowance is one second of the quota), and the client reports the
# throttle time the broker told it.
c_producer_quota() {
  local t rate
  t=$(uniq_name acl-quota)
  topic_as_admin "$t" || return 1
  acls_ --add --allow-principal User:CN=compat-quota --producer --topic "$t" >/dev/null || return 1
  configs_ --alter --add-config producer_byte_rate=500000 --entity-type users --entity-name CN=compat-quota >/dev/null || return 1
  "$BIN/kafka-producer-perf-test.sh" --topic "$t" --num-records 5000 --record-size 1000 --throughput -1 --print-metrics \
    --producer.config "$D/quota.properties" --producer-props bootstrap.servers="$B" acks=1 >"$CASE_TMP/out" 2>&1
  local ok=$?
  configs_ --alter --delete-config producer_byte_rate --entity-type users --entity-name CN=compat-quota >/dev/null
  ((ok == 0)) || { fail "the perf test failed: $(grep -m2 -i 'exception\|error' "$CASE_TMP/out" | tr '\n' ' ' | head -c 300)"; return 1; }
  grep 'records sent\|produce-throttle-time' "$CASE_TMP/out"
  rate=$(sed -n 's/^5000 records sent, \([0-9.]*\) records\/sec.*/\1/p' "$CASE_TMP/out")
  [[ -n $rate ]] || { fail "no final report: $(tail -c 300 "$CASE_TMP/out" | tr '\n' ' ')"; return 1; }
  awk -v r="$rate" 'BEGIN {b = r * 1000; exit !(b >= 400000 && b <= 600000)}' \
    || fail "averaged $rate records/s of 1000 bytes against a quota of 500000 bytes/s" || return 1
  awk '/produce-throttle-time-avg/ && $NF+0 > 0 {ok=1} END {exit !ok}' "$CASE_TMP/out" \
    || fail "the producer reports no throttle time: $(grep produce-throttle-time "$CASE_TMP/out" | tr -s ' ' | tr '\n' ' ')"
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
  report_all FAIL "skua did not start: $(tail -n 5 "$D/broker.log" | tr '\n' ' ')"
  exit 0
fi
for c in "${CASES[@]}"; do
  # shellcheck disable=SC2086  # "ID FUNCTION"
  run_case $c
done
exit 0
