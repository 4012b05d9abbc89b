#!/usr/bin/env bash
# skua compatibility suite: a ZooKeeper-mode Apache Kafka 3.9 broker replaced by skua in
# place, and back again.
#   compat/migration/zk-migration.sh SKUA_BINARY
#   compat/migration/zk-migration.sh --skip REASON     every case reported as SKIP
# Prints one PASS/FAIL (or SKIP) line per case.
#
# A one-broker Kafka 3.9.1 cluster on ZooKeeper (scripts/cluster) writes topics (several
# partitions, compacted and not), idempotent-producer data and the offsets of two classic
# groups (Java, librdkafka); the broker stops; skua starts with the same server.properties
# (same broker.id, log dir and ZooKeeper) and must be the cluster's broker and controller:
# the same committed offsets and lag, each group resuming exactly at its offsets, every
# record served, new topics and records accepted; skua stops; Kafka 3.9 starts again and
# must serve everything, including what skua wrote. One idempotent producer writes
# throughout, across both swaps, and every write it got acknowledged is stored exactly once.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
source "$here/../lib/common.sh"
source "$here/../lib/cases.sh"
SKUA=${1:?usage: zk-migration.sh SKUA_BINARY | --skip REASON}
PY=${PY:-python3}
export COMPAT_TOOL_TIMEOUT=${COMPAT_TOOL_TIMEOUT:-60}
BIN="$here/../bin"
D=$(mktemp -d "${TMPDIR:-/tmp}/compat-zk-migration.XXXXXX")

# wait_writer: the writer (started inside the setup's command substitution, so not a child
# of this shell) has exited.
wait_writer() {
  local pid; pid=$(cat "$D/writer.pid" 2>/dev/null) || return 0
  for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
  kill "$pid" 2>/dev/null
}
cleanup() {
  touch "$D/stop-writer"
  wait_writer
  [[ -f $D/brokers ]] && "$root/scripts/cluster" stop "$D" >/dev/null 2>&1
  if [[ -n ${COMPAT_MIGRATION_KEEP:-} ]]; then log "zk migration dir kept: $D"; else rm -rf "$D"; fi
}
trap cleanup EXIT

cluster() { "$root/scripts/cluster" "$@"; }
# swap_to KIND: the broker stops cleanly (a controlled shutdown) and starts again as KIND
# (kafka or skua) on the same server.properties, ports and data.
swap_to() {
  cluster term "$D" 1 || return 1
  echo "$1" >"$D/broker-1/kind"
  cluster restart "$D" 1 >/dev/null || { tail -n 30 "$D/broker-1/server.log" >&2; return 1; }
  # every partition led again before the cases read it
  retry_until 60 all_led || fail "partitions without a leader after the swap to $1: $(tr '\n' ' ' <"$D/describe.topics" | head -c 300)"
}
# all_led: kafka-topics.sh --describe answers, lists the 7 partitions of mig, migc and migp,
# and each has a leader.
all_led() {
  cluster topics "$D" --describe --topic 'mig.*' >"$D/describe.topics" 2>&1 || return 1
  [[ $(grep -c 'Partition: ' "$D/describe.topics") -ge 7 ]] || return 1
  ! grep -Eq 'Leader: (none|-1)' "$D/describe.topics"
}

groups_cmd() { "$BIN/kafka-consumer-groups.sh" --bootstrap-server "$B" "$@"; }
describe() { # GROUP OUT: "TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG" rows, sorted
  groups_cmd --describe --group "$1" >"$2.raw" 2>&1 || { cat "$2.raw"; return 1; }
  awk -v g="$1" '$1==g && $3 ~ /^[0-9]+$/ {print $2, $3, $4, $5, $6}' "$2.raw" | sort >"$2"
  [[ -s $2 ]] || { cat "$2.raw"; return 1; }
}
describe_all() { # SUFFIX
  local g
  for g in gjava grdk; do describe "$g" "$D/describe.$g.$1" || return 1; done
}
lag_of() { awk '{s += $5} END {print s + 0}' "$1"; }
remaining() { awk '{s += $3} END {print 300 - s}' "$1"; }
java_consume() { # GROUP COUNT
  "$BIN/kafka-console-consumer.sh" --bootstrap-server "$B" --topic mig --group "$1" \
    --from-beginning --max-messages "$2" --timeout-ms 15000 2>/dev/null
}

# ---------------------------------------------------------------- Kafka 3.9 writes ---
kafka_writes() {
  SKUA_BIN=$SKUA cluster start 1 --dir "$D" >/dev/null || return 1
  B=$(cat "$D/bootstrap")
  "$PY" "$here/mig.py" create "$B" || return 1
  "$PY" "$here/mig.py" produce "$B" mig 300 0 || return 1
  "$PY" "$here/mig.py" produce "$B" migc 60 0 || return 1
  "$PY" "$here/mig.py" writer "$B" migp "$D/stop-writer" "$D/writer.json" >"$D/writer.out" 2>&1 &
  echo $! >"$D/writer.pid"
  java_consume gjava 100 >/dev/null || return 1
  "$PY" "$here/mig.py" group "$B" grdk mig 150 >"$D/grdk.kafka" || return 1
  describe_all kafka || return 1
  "$PY" "$here/mig.py" snapshot "$B" "$D/records.kafka" mig migc || return 1
}

# ------------------------------------------------------------------ skua serves ----
c_skua_takes_over() {
  # skua_bin for scripts/cluster's restart
  echo "$SKUA" >"$D/skua-bin"
  swap_to skua || return 1
  cluster zk-shell "$D" get /controller >"$CASE_TMP/ctl" 2>&1
  grep -q '"brokerid":1' "$CASE_TMP/ctl" || fail "skua is not the controller: $(tr '\n' ' ' <"$CASE_TMP/ctl" | head -c 200)"
}
c_describe_same() {
  describe_all skua || return 1
  local g
  for g in gjava grdk; do
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
c_java_group_resumes() {
  local lag; lag=$(remaining "$D/describe.gjava.kafka")
  ((lag > 0)) || fail "gjava has no lag to resume"
  local got; got=$(java_consume gjava "$lag" | wc -l)
  [[ $got -eq $lag ]] || fail "gjava got $got records, its lag was $lag"
  got=$(java_consume gjava 1 | wc -l)
  [[ $got -eq 0 ]] || fail "gjava got more records after its lag"
}
c_skua_writes() {
  "$PY" "$here/mig.py" produce "$B" mig 90 300 || return 1
  "$BIN/kafka-topics.sh" --bootstrap-server "$B" --create --topic fromskua --partitions 2 \
    --replication-factor 1 >/dev/null || return 1
  "$PY" "$here/mig.py" produce "$B" fromskua 20 0 || return 1
  "$PY" "$here/mig.py" group "$B" grdk mig 30 >/dev/null || return 1
  describe_all skua-final || return 1
  "$PY" "$here/mig.py" snapshot "$B" "$D/records.skua-final" mig migc fromskua || return 1
}

# ------------------------------------------------------------------ and back -------
c_kafka_takes_over_again() { swap_to kafka; }
c_kafka_serves_everything() {
  "$PY" "$here/mig.py" snapshot "$B" "$D/records.back" mig migc fromskua || return 1
  cmp -s "$D/records.skua-final" "$D/records.back" \
    || fail "records differ: $(diff "$D/records.skua-final" "$D/records.back" | head -n 3 | tr '\n' ' ')"
  [[ $(wc -l <"$D/records.back") -eq 470 ]] || fail "$(wc -l <"$D/records.back") records, want 470"
  describe_all back || return 1
  local g
  for g in gjava grdk; do
    diff "$D/describe.$g.skua-final" "$D/describe.$g.back" >"$CASE_TMP/diff" \
      || fail "$g: $(tr '\n' ' ' <"$CASE_TMP/diff" | head -c 300)"
  done
}
c_idempotent_writer() {
  touch "$D/stop-writer"
  wait_writer
  "$PY" "$here/mig.py" check-writer "$B" migp "$D/writer.json"
}

CASES=(
  "zkmigration.skua_replaces_kafka39_broker c_skua_takes_over"
  "zkmigration.describe_same_offsets c_describe_same"
  "zkmigration.every_record c_every_record"
  "zkmigration.java_group_resumes c_java_group_resumes"
  "zkmigration.skua_writes c_skua_writes"
  "zkmigration.kafka39_replaces_skua c_kafka_takes_over_again"
  "zkmigration.kafka39_serves_everything c_kafka_serves_everything"
  "zkmigration.idempotent_writer_across_swaps c_idempotent_writer"
)
report_all() { # STATUS REASON
  local c
  for c in "${CASES[@]}"; do echo "$1 ${c%% *}: $2"; done
}

if [[ $SKUA == --skip ]]; then
  report_all SKIP "${2:-not run}"
  exit 0
fi
B=""
if ! out=$(kafka_writes 2>&1); then
  report_all FAIL "Apache Kafka 3.9.1 (ZooKeeper mode) could not set up the dir: $(tail -n 3 <<<"$out" | tr '\n' ' ')"
  exit 0
fi
B=$(cat "$D/bootstrap")
for c in "${CASES[@]}"; do
  # shellcheck disable=SC2086  # "ID FUNCTION"
  run_case $c
done
exit 0
