#!/usr/bin/env bash
# skua compatibility suite: moving a data dir from Apache Kafka to skua and back.
#   compat/migration/migration.sh SKUA_BINARY
#   compat/migration/migration.sh --skip REASON     every case reported as SKIP
# Prints one PASS/FAIL (or SKIP) line per case.
#
# Apache Kafka 4.4 (KRaft, single node) writes topics (several partitions, compacted and
# not), idempotent-producer data and the offsets of three groups (Java classic, Java
# KIP-848, librdkafka); it stops; skua starts on the same dir with Kafka's own
# server.properties and the same port, and must show the same committed offsets and lag
# (kafka-consumer-groups.sh --describe), resume each group exactly at its offsets, serve
# every record, and accept more; skua stops; Kafka starts on the dir again and must serve
# everything, including what skua wrote. One idempotent producer writes throughout, across
# both swaps, and every write it got acknowledged must be stored exactly once. Kafka's
# tools also make ACLs (LITERAL and PREFIXED, ALLOW and DENY), client quotas and a SCRAM
# user (AccessControlEntryRecord, ClientQuotaRecord, UserScramCredentialRecord in
# __cluster_metadata): skua must list the same and enforce them (User:ANONYMOUS, a super
# user for Kafka here, is not one for skua; alice signs in with SCRAM on a second
# listener), change some through the same tools, and Kafka must list skua's changes.
# Last, a dir skua created from scratch is handed to Kafka.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../lib/common.sh"
source "$here/../lib/cases.sh"
SKUA=${1:?usage: migration.sh SKUA_BINARY | --skip REASON}
PY=${PY:-python3}
export KAFKA_VERSION=${MIGRATION_KAFKA_VERSION:-4.4.0}
export COMPAT_TOOL_TIMEOUT=${COMPAT_TOOL_TIMEOUT:-60}
BIN="$here/../bin"
D=$(mktemp -d "${TMPDIR:-/tmp}/compat-migration.XXXXXX")
PORT=$(free_port)
B=127.0.0.1:$PORT
SASL_PORT=$(free_port)
skua_pid="" writer_pid=""

cleanup() {
  touch "$D/stop-writer"
  [[ -n $writer_pid ]] && { wait "$writer_pid" 2>/dev/null || true; }
  stop_skua
  [[ -f $D/kafka.pid ]] && "$here/../kafka-broker.sh" --stop "$D" >/dev/null 2>&1
  [[ -f $D/fresh/kafka.pid ]] && "$here/../kafka-broker.sh" --stop "$D/fresh" >/dev/null 2>&1
  if [[ -n ${COMPAT_MIGRATION_KEEP:-} ]]; then log "migration dir kept: $D"; else rm -rf "$D"; fi
}
trap cleanup EXIT

start_kafka() { # DIR
  "$here/../kafka-broker.sh" --version "$KAFKA_VERSION" --port "$PORT" --dir "$1" --daemon >/dev/null
}
stop_kafka() { "$here/../kafka-broker.sh" --stop "$1"; }
# skua on Kafka's dir with Kafka's server.properties; only the listeners differ (skua has
# no CONTROLLER listener, and a SASL_PLAINTEXT one for the SCRAM user), and User:ANONYMOUS
# is no super user, so that the ACLs bind it.
start_skua() { # DIR LOGFILE
  local scram=org.apache.kafka.common.security.scram.ScramLoginModule
  # shellcheck disable=SC2086  # SKUA may carry arguments (scripts/compat --broker CMD)
  $SKUA "$1/server.properties" \
    --override "listeners=PLAINTEXT://127.0.0.1:$PORT,SASL_PLAINTEXT://127.0.0.1:$SASL_PORT" \
    --override "advertised.listeners=PLAINTEXT://127.0.0.1:$PORT,SASL_PLAINTEXT://127.0.0.1:$SASL_PORT" \
    --override "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT" \
    --override "sasl.enabled.mechanisms=SCRAM-SHA-256" \
    --override "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=$scram required;" \
    --override "super.users=User:admin" >"$2" 2>&1 &
  skua_pid=$!
  wait_port 127.0.0.1 "$PORT" 60 "$skua_pid" || { tail -n 20 "$2" >&2; return 1; }
}
stop_skua() {
  [[ -n $skua_pid ]] || return 0
  kill "$skua_pid" 2>/dev/null
  for _ in $(seq 1 100); do kill -0 "$skua_pid" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$skua_pid" 2>/dev/null
  wait "$skua_pid" 2>/dev/null
  skua_pid=""
}

# kafka-configs.sh's class moved out of kafka.admin in Kafka 4.4
configs_cmd() { "$BIN/kafka-run-class.sh" org.apache.kafka.tools.ConfigCommand --bootstrap-server "$B" "$@"; }
acls_cmd() { "$BIN/kafka-acls.sh" --bootstrap-server "$B" "$@"; }
groups_cmd() { "$BIN/kafka-consumer-groups.sh" --bootstrap-server "$B" "$@"; }
# describe GROUP OUT: "TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG" rows, sorted
describe() {
  groups_cmd --describe --group "$1" >"$2.raw" 2>&1 || { cat "$2.raw"; return 1; }
  awk -v g="$1" '$1==g && $3 ~ /^[0-9]+$/ {print $2, $3, $4, $5, $6}' "$2.raw" | sort >"$2"
  [[ -s $2 ]] || { cat "$2.raw"; return 1; }
}
describe_all() { # SUFFIX
  local g
  for g in gjava gnew grdk; do describe "$g" "$D/describe.$g.$1" || return 1; done
}
lag_of() { awk '{s += $5} END {print s + 0}' "$1"; }
# remaining FILE: records of mig (3 partitions of 100 when a group's describe was taken)
# the group has not committed past; a partition without a commit counts from 0
remaining() { awk '{s += $3} END {print 300 - s}' "$1"; }
# java_consume GROUP COUNT [consumer props...]: console consumer in a group, prints the
# records it got (values mig-N), one a line. Only record lines count: Kafka 4.4's console
# consumer prints its deprecation notice for --consumer-property on stdout.
java_consume() {
  local g=$1 n=$2; shift 2
  local props=()
  for p in "$@"; do props+=(--consumer-property "$p"); done
  "$BIN/kafka-console-consumer.sh" --bootstrap-server "$B" --topic mig --group "$g" \
    --from-beginning --max-messages "$n" --timeout-ms 15000 "${props[@]}" 2>/dev/null \
    | awk '/^mig-[0-9]+$/'
}

# security_listing OUT: every ACL, client quota and SCRAM user the broker lists, one a
# line, sorted (the tools print them in the order the broker answers).
security_listing() {
  {
    acls_cmd --list || return 1
    configs_cmd --describe --entity-type users || return 1
    configs_cmd --describe --entity-type users --entity-type clients || return 1
  } >"$1.raw" 2>&1 || { cat "$1.raw"; return 1; }
  awk '/^Current ACLs for resource/ {r = $0; sub(/^[^(]*\(/, "", r); sub(/\)`:$/, "", r); next}
       /^[ \t]*\(principal=/ {gsub(/^[ \t]+/, ""); print "acl " r " " $0; next}
       /^(Quota|SCRAM)/ {  # the keys in order (each broker answers in its own)
         i = index($0, " are "); n = split(substr($0, i + 5), kv, ", ")
         for (a = 2; a <= n; a++) for (b = a; b > 1 && kv[b - 1] > kv[b]; b--) {
           t = kv[b]; kv[b] = kv[b - 1]; kv[b - 1] = t
         }
         line = substr($0, 1, i + 4) kv[1]; for (a = 2; a <= n; a++) line = line ", " kv[a]
         print line
       }' "$1.raw" | sort >"$1"
  [[ -s $1 ]] || { cat "$1.raw"; return 1; }
}
# ACLs, quotas and a SCRAM user through Kafka's tools; the topics they are about.
security_writes() {
  "$PY" "$here/mig.py" topics "$B" deny-x alice-only quota-t || return 1
  acls_cmd --add --allow-principal User:alice --deny-principal User:ANONYMOUS \
    --operation Read --topic alice-only >/dev/null || return 1
  acls_cmd --add --allow-principal User:alice --deny-principal User:ANONYMOUS \
    --operation Write --topic deny- --resource-pattern-type prefixed >/dev/null || return 1
  configs_cmd --alter --entity-type users --entity-name ANONYMOUS --entity-type clients \
    --entity-name quota-client \
    --add-config producer_byte_rate=50000,consumer_byte_rate=80000,request_percentage=50 \
    >/dev/null || return 1
  configs_cmd --alter --entity-type users --entity-default \
    --add-config consumer_byte_rate=4194304 >/dev/null || return 1
  configs_cmd --alter --entity-type users --entity-name alice \
    --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-pw]' >/dev/null || return 1
  security_listing "$D/security.kafka"
}

# ---------------------------------------------------------------- Kafka writes ------
kafka_writes() {
  start_kafka "$D" || return 1
  "$PY" "$here/mig.py" create "$B" || return 1
  security_writes || return 1
  "$PY" "$here/mig.py" produce "$B" mig 300 0 || return 1
  "$PY" "$here/mig.py" produce "$B" migc 60 0 || return 1
  # (its output goes to files: this function runs in a command substitution, which would
  # otherwise wait for the writer to end)
  "$PY" "$here/mig.py" writer "$B" migp "$D/stop-writer" "$D/writer.json" >"$D/writer.out" 2>&1 &
  writer_pid=$!
  java_consume gjava 100 >/dev/null || return 1
  java_consume gnew 70 group.protocol=consumer >/dev/null || return 1
  "$PY" "$here/mig.py" group "$B" grdk mig 150 >"$D/grdk.kafka" || return 1
  describe_all kafka || return 1
  "$PY" "$here/mig.py" snapshot "$B" "$D/records.kafka" mig migc || return 1
  stop_kafka "$D"
}

# ------------------------------------------------------------------ skua serves ----
c_skua_starts() {
  start_skua "$D" "$D/skua.log" || return 1
  # skua listens before it has replayed the metadata log (requests wait for it), so the
  # port answering does not mean the line is written yet
  retry_until 60 grep -q "metadata log replayed" "$D/skua.log" || fail "no metadata log replay in skua's log"
}
c_describe_same() {
  describe_all skua || return 1
  local g
  for g in gjava gnew grdk; do
    diff "$D/describe.$g.kafka" "$D/describe.$g.skua" >"$CASE_TMP/diff" \
      || fail "$g: $(tr '\n' ' ' <"$CASE_TMP/diff" | head -c 300)"
  done
}
c_every_record() {
  "$PY" "$here/mig.py" snapshot "$B" "$D/records.skua" mig migc || return 1
  cmp -s "$D/records.kafka" "$D/records.skua" \
    || fail "records differ: $(diff "$D/records.kafka" "$D/records.skua" | head -n 3 | tr '\n' ' ')"
  [[ $(wc -l <"$D/records.skua") -eq 360 ]] || fail "$(wc -l <"$D/records.skua") records, want 360"
}
# The group gets exactly its lag, then nothing: it resumed at its committed offsets.
java_group_resumes() { # GROUP [props...]
  local g=$1; shift
  local lag; lag=$(remaining "$D/describe.$g.kafka")
  ((lag > 0)) || { fail "$g has no lag to resume"; return 1; }
  java_consume "$g" "$lag" "$@" >"$CASE_TMP/first"
  local got; got=$(wc -l <"$CASE_TMP/first")
  [[ $got -eq $lag ]] || { fail "$g got $got records, its lag was $lag"; return 1; }
  # (a record's value mig-N names its partition, N % 3, and offset there, N / 3)
  java_consume "$g" 1 "$@" >"$CASE_TMP/second"
  [[ ! -s $CASE_TMP/second ]] \
    || { fail "$g got more records after its lag: $(tr '\n' ' ' <"$CASE_TMP/second")"; return 1; }
  describe "$g" "$CASE_TMP/after" || return 1
  [[ $(lag_of "$CASE_TMP/after") -eq 0 ]] || fail "$g still lags: $(tr '\n' ' ' <"$CASE_TMP/after")"
}
c_java_group_resumes() { java_group_resumes gjava; }
c_java_848_group_resumes() { java_group_resumes gnew group.protocol=consumer; }
c_librdkafka_group_resumes() {
  local lag; lag=$(remaining "$D/describe.grdk.kafka")
  "$PY" "$here/mig.py" group "$B" grdk mig "$lag" >"$CASE_TMP/out" || return 1
  cat "$CASE_TMP/out"
  grep -qx "count $lag" "$CASE_TMP/out" || fail "want count $lag: $(tr '\n' ' ' <"$CASE_TMP/out")"
  ! grep -q '^extra' "$CASE_TMP/out" || fail "records past the lag: $(grep '^extra' "$CASE_TMP/out")"
  # the first offset read from each partition is the one Kafka had committed (0 if none)
  while read -r _ p o; do
    awk -v p="$p" -v o="$o" '$1=="mig" && $2==p {c=$3} END {exit !((c == "" ? 0 : c) == o)}' \
      "$D/describe.grdk.kafka" || fail "partition $p resumed at $o, not at the committed offset"
  done < <(grep '^first' "$CASE_TMP/out")
}
c_topic_configs() {
  configs_cmd --entity-type topics --entity-name migc --describe >"$CASE_TMP/out" 2>&1 \
    || fail "kafka-configs: $(head -c 200 "$CASE_TMP/out")"
  grep -q 'cleanup.policy=compact' "$CASE_TMP/out" || fail "migc: $(head -c 200 "$CASE_TMP/out")"
  configs_cmd --entity-type topics --entity-name mig --describe >"$CASE_TMP/out" 2>&1 \
    || fail "kafka-configs: $(head -c 200 "$CASE_TMP/out")"
  grep -q 'retention.ms=604800000' "$CASE_TMP/out" || fail "mig: $(head -c 200 "$CASE_TMP/out")"
}
c_security_same() {
  security_listing "$D/security.skua" || return 1
  [[ $(grep -c '^acl ' "$D/security.kafka") -eq 4 ]] || fail "Kafka listed: $(tr '\n' ' ' <"$D/security.kafka")"
  diff "$D/security.kafka" "$D/security.skua" >"$CASE_TMP/diff" \
    || fail "$(tr '\n' ' ' <"$CASE_TMP/diff" | head -c 400)"
}
c_security_enforced() {
  "$PY" "$here/mig.py" security "$B" "127.0.0.1:$SASL_PORT" >"$CASE_TMP/out" 2>&1 \
    || fail "$(tail -n 1 "$CASE_TMP/out")"
}
# skua removes an ACL and a quota, adds an ACL and a SCRAM user, and changes a quota
# (skua's own listing of them is tests/it/kafka_dir_adoption.rs's).
c_security_changes() {
  acls_cmd --remove --force --deny-principal User:ANONYMOUS --operation Read \
    --topic alice-only >/dev/null || return 1
  acls_cmd --add --allow-principal User:bob --operation Describe --group skua- \
    --resource-pattern-type prefixed >/dev/null || return 1
  configs_cmd --alter --entity-type users --entity-name ANONYMOUS --entity-type clients \
    --entity-name quota-client --add-config producer_byte_rate=60000 \
    --delete-config consumer_byte_rate >/dev/null || return 1
  configs_cmd --alter --entity-type users --entity-name bob \
    --add-config 'SCRAM-SHA-256=[iterations=4096,password=bob-pw]' >/dev/null || return 1
  # what Kafka must list when it has the dir again (c_kafka_security_same)
  {
    grep -v 'principal=User:ANONYMOUS, host=\*, operation=READ' "$D/security.kafka" \
      | sed "s/\(client-id 'quota-client' are \).*/\1producer_byte_rate=60000.0, request_percentage=50.0/"
    echo "acl resourceType=GROUP, name=skua-, patternType=PREFIXED (principal=User:bob, host=*, operation=DESCRIBE, permissionType=ALLOW)"
    echo "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-256=iterations=4096"
  } | sort >"$D/security.skua-final"
}
c_skua_writes() {
  "$PY" "$here/mig.py" produce "$B" mig 90 300 || return 1
  "$BIN/kafka-topics.sh" --bootstrap-server "$B" --create --topic fromskua --partitions 2 >/dev/null || return 1
  "$PY" "$here/mig.py" produce "$B" fromskua 20 0 || return 1
  "$PY" "$here/mig.py" group "$B" grdk mig 30 >/dev/null || return 1
  describe_all skua-final || return 1
  "$PY" "$here/mig.py" snapshot "$B" "$D/records.skua-final" mig migc fromskua || return 1
  stop_skua
  grep -q "skua stopped" "$D/skua.log" || fail "skua did not stop cleanly"
}

# ------------------------------------------------------------------ and back -------
c_kafka_starts_again() {
  start_kafka "$D" || { tail -n 30 "$D/server.log"; return 1; }
}
c_kafka_serves_everything() {
  "$PY" "$here/mig.py" snapshot "$B" "$D/records.back" mig migc fromskua || return 1
  cmp -s "$D/records.skua-final" "$D/records.back" \
    || fail "records differ: $(diff "$D/records.skua-final" "$D/records.back" | head -n 3 | tr '\n' ' ')"
  [[ $(wc -l <"$D/records.back") -eq 470 ]] || fail "$(wc -l <"$D/records.back") records, want 470"
}
c_kafka_group_offsets() {
  describe_all back || return 1
  local g
  for g in gjava gnew grdk; do
    diff "$D/describe.$g.skua-final" "$D/describe.$g.back" >"$CASE_TMP/diff" \
      || fail "$g: $(tr '\n' ' ' <"$CASE_TMP/diff" | head -c 300)"
  done
}
c_kafka_topic_configs() { c_topic_configs; }
c_kafka_security_same() {
  security_listing "$D/security.back" || return 1
  diff "$D/security.skua-final" "$D/security.back" >"$CASE_TMP/diff" \
    || fail "$(tr '\n' ' ' <"$CASE_TMP/diff" | head -c 400)"
}
c_idempotent_writer() {
  touch "$D/stop-writer"
  wait "$writer_pid"; writer_pid=""
  "$PY" "$here/mig.py" check-writer "$B" migp "$D/writer.json"
}

# A dir skua created goes to Kafka.
c_skua_dir_to_kafka() {
  stop_kafka "$D"
  local F=$D/fresh
  mkdir -p "$F"
  sed "s#^log.dirs=.*#log.dirs=$F/data#" "$D/server.properties" >"$F/server.properties"
  start_skua "$F" "$F/skua.log" || return 1
  "$PY" "$here/mig.py" create "$B" || return 1
  "$PY" "$here/mig.py" produce "$B" mig 50 0 || return 1
  "$PY" "$here/mig.py" group "$B" gfresh mig 20 >/dev/null || return 1
  describe gfresh "$F/describe.skua" || return 1
  "$PY" "$here/mig.py" snapshot "$B" "$F/records.skua" mig || return 1
  stop_skua
  start_kafka "$F" || { tail -n 30 "$F/server.log"; return 1; }
  "$PY" "$here/mig.py" snapshot "$B" "$F/records.kafka" mig || return 1
  cmp -s "$F/records.skua" "$F/records.kafka" || fail "records differ after the move to Kafka"
  describe gfresh "$F/describe.kafka" || return 1
  diff "$F/describe.skua" "$F/describe.kafka" >"$CASE_TMP/diff" \
    || fail "gfresh: $(tr '\n' ' ' <"$CASE_TMP/diff" | head -c 300)"
  stop_kafka "$F"
}

CASES=(
  "migration.skua_starts_on_kafka_dir c_skua_starts"
  "migration.describe_same_offsets c_describe_same"
  "migration.every_record c_every_record"
  "migration.java_group_resumes c_java_group_resumes"
  "migration.java_848_group_resumes c_java_848_group_resumes"
  "migration.librdkafka_group_resumes c_librdkafka_group_resumes"
  "migration.topic_configs c_topic_configs"
  "migration.security_listed_same c_security_same"
  "migration.security_enforced c_security_enforced"
  "migration.security_changed_by_skua c_security_changes"
  "migration.skua_writes c_skua_writes"
  "migration.kafka_starts_on_skua_dir c_kafka_starts_again"
  "migration.kafka_serves_everything c_kafka_serves_everything"
  "migration.kafka_group_offsets c_kafka_group_offsets"
  "migration.kafka_topic_configs c_kafka_topic_configs"
  "migration.kafka_security_same c_kafka_security_same"
  "migration.idempotent_writer_across_swaps c_idempotent_writer"
  "migration.skua_dir_to_kafka c_skua_dir_to_kafka"
)
report_all() { # STATUS REASON
  local c
  for c in "${CASES[@]}"; do echo "$1 ${c%% *}: $2"; done
}

if [[ $SKUA == --skip ]]; then
  report_all SKIP "${2:-not run}"
  exit 0
fi
if ! out=$(kafka_writes 2>&1); then
  report_all FAIL "Apache Kafka $KAFKA_VERSION could not set up the dir: $(tail -n 3 <<<"$out" | tr '\n' ' ')"
  exit 0
fi
for c in "${CASES[@]}"; do
  # shellcheck disable=SC2086  # "ID FUNCTION"
  run_case $c
done
exit 0
