#!/usr/bin/env bash
# skua compatibility suite: a three-broker Apache Kafka 3.9.1 cluster on ZooKeeper replaced
# broker by broker by skua under load, a rolling restart of the skua cluster, and back.
#   compat/rolling/rolling.sh SKUA_BINARY [--full] [--kraft]
#   compat/rolling/rolling.sh --skip REASON [--kraft]   every case reported as SKIP
# Prints one PASS/FAIL (or SKIP) line per case. COMPAT_ROLLING_FULL=1 is the same as --full.
#
# With --kraft (COMPAT_ROLLING_KRAFT=1) the same cases run on a KRaft cluster instead
# (cases rolling_kraft.*): one Apache Kafka 4.4 controller and three Kafka 4.4 brokers
# (scripts/cluster start --kraft), each replaced by skua as a KRaft broker with the same
# server.properties and node.id, on its dir or on an empty dir formatted for the cluster
# (kafka-storage.sh format), and back to Kafka 4.4 on the dirs skua wrote. The clients and
# tools stay Kafka 3.9.1's. COMPAT_ROLLING_CONTROLLERS=3 makes the quorum three Kafka 4.4
# controllers (scripts/cluster start --kraft --controllers 3).
#
# Three Kafka 3.9.1 brokers (scripts/cluster), an RF 3 topic with min.insync.replicas=2, an
# idempotent acks=all Java producer and a classic Java consumer group that run from the
# first case to the last (scripts/faults.d/FaultClient.java: writer, member). Each broker in
# turn is stopped by SIGTERM (a controlled shutdown) and started as skua with the same
# server.properties and broker.id: broker 1 on Kafka's log dir (skua adopts it), broker 2 on
# an empty dir (it re-replicates everything, __consumer_offsets included), broker 3 on its
# dir (on an empty one with --full); every step waits until every partition has all three
# replicas in its ISR. With three skua brokers: every acknowledged record is stored once at
# its acknowledged offset, the group's committed offsets are what its member committed (the
# admin client and kafka-consumer-groups.sh) and it read each offset below them once. Then
# each skua broker is restarted by SIGTERM in turn (a rolling restart), and each is replaced
# by Kafka 3.9.1 again on the dir skua wrote, and all of it is checked again, with the
# producer having seen no record error (only retries), and the replicas' segment bytes
# identical. The short form writes 3 partitions; --full writes 6, puts 200,000 records in a
# second RF 3 topic before the first step (more for the empty dirs to copy) and keeps the
# load on for 20 s after each step. Each check's summary goes to stderr.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
source "$here/../lib/common.sh"
source "$here/../lib/cases.sh"
SKUA=${1:?usage: rolling.sh SKUA_BINARY [--full] [--kraft] | --skip REASON [--kraft]}
FULL=${COMPAT_ROLLING_FULL:-0} KRAFT=${COMPAT_ROLLING_KRAFT:-0}
for a in "${@:2}"; do
  case $a in --full) FULL=1 ;; --kraft) KRAFT=1 ;; esac
done
TOPIC=rolling GROUP=rolling-group
# The cases' names: the suite's and the Kafka brokers' version
if ((KRAFT)); then SUITE=rolling_kraft KAFKA=kafka44 START=(--kraft --controllers "${COMPAT_ROLLING_CONTROLLERS:-1}")
else SUITE=rolling KAFKA=kafka39 START=(--override zookeeper.session.timeout.ms=10000); fi
if ((FULL)); then PARTITIONS=6 PREFILL=200000 DWELL=20 THIRD=empty
else PARTITIONS=3 PREFILL=0 DWELL=0 THIRD=same; fi
# A broker restarting on an empty dir copies every partition from the others.
ISR_WAIT_S=$((FULL ? 300 : 150))
D=$(mktemp -d "${TMPDIR:-/tmp}/compat-rolling.XXXXXX")
TOPICS=("$TOPIC" __consumer_offsets)
((PREFILL == 0)) || TOPICS+=("$TOPIC-bulk")
# note: a line on the suite's stderr even from inside a case (whose output is the case log)
exec 3>&2
note() { printf '[rolling] %s\n' "$*" >&3; }

cleanup() {
  touch "$D/stop"
  local p
  for p in writer member; do
    [[ -f $D/$p.pid ]] || continue
    for _ in $(seq 1 150); do kill -0 "$(cat "$D/$p.pid")" 2>/dev/null || break; sleep 0.2; done
    kill "$(cat "$D/$p.pid")" 2>/dev/null
  done
  [[ -f $D/bootstrap ]] && "$root/scripts/cluster" stop "$D" >/dev/null 2>&1
  rm -rf "$CASE_TMP"
  if [[ -n ${COMPAT_ROLLING_KEEP:-} ]]; then log "rolling dir kept: $D"; else rm -rf "$D"; fi
}
trap cleanup EXIT

cluster() { "$root/scripts/cluster" "$@"; }
# FaultClient on Kafka 3.9.1's jars, with one SLF4J binding (so failure reasons are not
# SLF4J's warning about two)
client() {
  java -Dlog4j.configuration="file:$D/log4j-quiet.properties" -cp "$D/classes:$CP" FaultClient "$@"
}
acked() { grep -c '^ack' "$D/acks" 2>/dev/null || echo 0; }
acked_over() { (($(acked) > $1)); }
# the writer has acknowledgements and the member has read records
clients_working() { [[ -s $D/read ]] && acked_over 100; }
wait_isr() { client wait-isr "$B" "$ISR_WAIT_S" 3 "${TOPICS[@]}" >"$CASE_TMP/isr" 2>&1 || fail "$(cat "$CASE_TMP/isr")"; }
# progress: the writer gets acknowledgements again after a step (the count it had before
# plus 100), and the clients are still running.
progress() {
  local before=$1 p
  for p in writer member; do
    kill -0 "$(cat "$D/$p.pid")" 2>/dev/null || { fail "the $p exited: $(tail -n 3 "$D/$p.out" "$D/$p.err" | tr '\n' ' ')"; return 1; }
  done
  retry_until 90 acked_over $((before + 100)) || { fail "no acknowledged writes after the step ($(acked) acked)"; return 1; }
  ((DWELL == 0)) || sleep "$DWELL"
}
kind_of() { cat "$D/broker-$1/kind"; }
# replace BROKER KIND same|empty: SIGTERM the broker, start KIND (skua or kafka) with the
# same server.properties on its log dir or on an empty one, wait for full ISRs.
replace() {
  local i=$1 kind=$2 how=$3 b="$D/broker-$1" before
  before=$(acked)
  note "broker $i: $(kind_of "$i") -> $kind ($how dir), $before acknowledged so far"
  cluster term "$D" "$i" || { fail "SIGTERM of broker $i failed"; return 1; }
  # a clean (controlled) shutdown leaves Kafka's marker; the harness's kill -9 fallback does not
  [[ -f $b/data/.kafka_cleanshutdown ]] || { fail "broker $i ($(kind_of "$i")) did not shut down cleanly"; return 1; }
  if [[ $how == empty ]]; then
    mv "$b/data" "$b/data.before-$kind" && mkdir "$b/data" || return 1
    # a KRaft broker's dir is formatted for its cluster before it starts
    if ((KRAFT)); then cluster format "$D" "$i" || { fail "kafka-storage.sh format of broker $i's empty dir failed"; return 1; }; fi
  fi
  echo "$kind" >"$b/kind"
  cluster restart "$D" "$i" >/dev/null 2>&1 || { fail "$kind did not start as broker $i: $(tail -n 3 "$b/server.log" | tr '\n' ' ')"; return 1; }
  wait_isr || return 1
  # writes go on once the step is over
  progress "$(acked)"
}
restart() { # BROKER: SIGTERM and start again, the same kind on the same dir
  replace "$1" "$(kind_of "$1")" same
}
preferred_election() {
  cluster tool "$D" org.apache.kafka.tools.LeaderElectionCommand --bootstrap-server "$B" \
    --election-type PREFERRED --all-topic-partitions >"$CASE_TMP/election" 2>&1 \
    || fail "kafka-leader-election.sh: $(tail -n 3 "$CASE_TMP/election" | tr '\n' ' ')"
}
# described OUT: "PARTITION CURRENT-OFFSET" rows of the group, from Kafka 3.9.1's
# kafka-consumer-groups.sh --describe.
describe_once() {
  cluster tool "$D" org.apache.kafka.tools.consumer.group.ConsumerGroupCommand --bootstrap-server "$B" \
    --describe --group "$GROUP" --timeout 30000 >"$1.raw" 2>&1 || return 1
  awk -v g="$GROUP" -v t="$TOPIC" '$1 == g && $2 == t {print $3, $4}' "$1.raw" | sort -n >"$1"
  [[ -s $1 ]]
}
described() {
  retry_until 30 describe_once "$1" \
    || fail "kafka-consumer-groups.sh --describe: $(grep -v '^SLF4J' "$1.raw" | grep -E 'Caused by|Error|Exception' | tail -n 2 | tr '\n' ' ')"
}
# group_offsets COMMITTED READS: the coordinator serves the offsets the member committed
# (admin client), kafka-consumer-groups.sh shows the same, and the member read each offset
# below them exactly once.
group_offsets() {
  client group-check "$B" "$GROUP" "$2" "$1" >"$CASE_TMP/gc" 2>&1 || { fail "$(cat "$CASE_TMP/gc")"; return 1; }
  note "$(cat "$CASE_TMP/gc")"
  described "$CASE_TMP/described" || return 1
  awk '$1 == "committed" {print $2, $3}' "$1" | sort -n >"$CASE_TMP/want"
  diff "$CASE_TMP/want" "$CASE_TMP/described" >/dev/null \
    || fail "kafka-consumer-groups.sh shows $(tr '\n' ' ' <"$CASE_TMP/described"), the member committed $(tr '\n' ' ' <"$CASE_TMP/want")"
}
# stored READS: every record acknowledged so far is stored once at its offset, and every
# record the group read is still there.
stored() {
  client check-running "$B" "$TOPIC" "$D/acks" "$1" >"$CASE_TMP/check" 2>&1 || { fail "$(cat "$CASE_TMP/check")"; return 1; }
  note "$(cat "$CASE_TMP/check")"
}

# -------------------------------------------------------------- Kafka 3.9 under load --
c_kafka_cluster_under_load() {
  B=$(cluster start 3 --dir "$D" "${START[@]}" \
    --override unclean.leader.election.enable=false 2>"$CASE_TMP/start") \
    || { fail "scripts/cluster start: $(tail -n 3 "$CASE_TMP/start" | tr '\n' ' ')"; return 1; }
  [[ ! -f $D/quorum ]] || note "KRaft controller quorum: $(cat "$D/quorum")"
  echo "$SKUA" >"$D/skua-bin"
  CP=$(ls "$(cat "$D/libs")"/*.jar | grep -v '/log4j-slf4j-impl-' | paste -sd:)
  mkdir -p "$D/classes"
  javac -nowarn -d "$D/classes" -cp "$(cat "$D/libs")/*" "$root/scripts/faults.d/FaultClient.java" || return 1
  client create "$B" "$TOPIC" "$PARTITIONS" || return 1
  if ((PREFILL > 0)); then
    client create "$B" "$TOPIC-bulk" "$PARTITIONS" && client produce "$B" "$TOPIC-bulk" "$PREFILL" || return 1
  fi
  client writer "$B" "$TOPIC" "$D/stop" "$D/acks" >"$D/writer.out" 2>"$D/writer.err" &
  echo $! >"$D/writer.pid"
  client member "$B" "$TOPIC" "$GROUP" "$D/stop" "$D/pause" "$D/read" >"$D/member.out" 2>"$D/member.err" &
  echo $! >"$D/member.pid"
  # the group's first commit creates __consumer_offsets
  retry_until 90 clients_working || { fail "no writes or no reads within 90 s"; return 1; }
  wait_isr || return 1
  progress 0
}

# ------------------------------------------------------------- replaced by skua ------
c_skua_same_dir() { replace 1 skua same; }
c_skua_empty_dir() { replace 2 skua empty; }
c_skua_third() { replace 3 skua "$THIRD"; }
# pause_member: the member stops taking records (it stays in the group) and reports what
# it has committed in $D/pause.acked.
pause_member() {
  touch "$D/pause"
  retry_until 60 test -f "$D/pause.acked" || { fail "the member did not pause"; return 1; }
}
resume_member() { rm -f "$D/pause"; }
c_all_skua_nothing_lost() {
  local i
  for i in 1 2 3; do [[ $(kind_of "$i") == skua ]] || fail "broker $i is $(kind_of "$i")"; done
  # skua leads its preferred partitions again, as the operator would ask after a roll
  preferred_election || return 1
  pause_member || return 1
  stored "$D/read"
}
c_all_skua_group_offsets() {
  group_offsets "$D/pause.acked" "$D/read"
  resume_member
}

# ------------------------------------------------- rolling restart of skua brokers ---
c_skua_rolling_restart() {
  local i
  for i in 1 2 3; do restart "$i" || return 1; done
  preferred_election || return 1
  ! grep -m 1 '^error' "$D/acks" || fail "the producer saw a record fail during the rolling restart"
}

# ------------------------------------------------------------- and back to Kafka -----
c_kafka_replaces_1() { replace 1 kafka same; }
c_kafka_replaces_2() { replace 2 kafka same; }
c_kafka_replaces_3() { replace 3 kafka same; }
c_all_kafka_nothing_lost() {
  touch "$D/stop"
  local p
  for p in writer member; do
    retry_until 120 bash -c "! kill -0 $(cat "$D/$p.pid") 2>/dev/null" || { fail "the $p did not stop"; return 1; }
  done
  note "$(cat "$D/writer.out")"
  note "$(tail -n 1 "$D/member.out")"
  client check "$B" "$TOPIC" "$D/acks" "$D/read" >"$CASE_TMP/check" 2>&1 || { fail "$(cat "$CASE_TMP/check")"; return 1; }
  note "$(cat "$CASE_TMP/check")"
  grep -q 'reported 0 record errors' "$D/writer.out" || fail "the producer saw record errors: $(cat "$D/writer.out")"
}
c_all_kafka_group_offsets() { group_offsets "$D/member.out" "$D/read"; }
# every replica holds the same segment bytes once all have caught up (a follower just
# restarted may still be fetching the last batches the writer sent)
c_replica_logs_identical() {
  wait_isr || return 1
  retry_until 60 compare_logs || fail "$(cat "$CASE_TMP/cmp")"
  note "$(cat "$CASE_TMP/cmp")"
}
compare_logs() {
  python3 - "$D" "$TOPIC" "$PARTITIONS" >"$CASE_TMP/cmp" 2>&1 <<'PY'
import glob, sys
d, topic, parts = sys.argv[1], sys.argv[2], int(sys.argv[3])
bad = []
for p in range(parts):
    logs = {}
    for b in (1, 2, 3):
        segs = sorted(glob.glob(f"{d}/broker-{b}/data/{topic}-{p}/*.log"))
        logs[b] = b"".join(open(s, "rb").read() for s in segs)
    if len(set(logs.values())) != 1:
        bad.append(f"{topic}-{p}: sizes {({b: len(v) for b, v in logs.items()})}")
if bad:
    sys.exit("replica logs differ: " + "; ".join(bad))
print(f"{parts} partitions: segment bytes identical on brokers 1-3")
PY
}

CASES=(
  "$SUITE.${KAFKA}_cluster_under_load c_kafka_cluster_under_load"
  "$SUITE.skua_replaces_${KAFKA}_same_dir c_skua_same_dir"
  "$SUITE.skua_replaces_${KAFKA}_empty_dir c_skua_empty_dir"
  "$SUITE.skua_replaces_third_${KAFKA} c_skua_third"
  "$SUITE.all_skua_nothing_lost c_all_skua_nothing_lost"
  "$SUITE.all_skua_group_offsets c_all_skua_group_offsets"
  "$SUITE.skua_rolling_restart c_skua_rolling_restart"
  "$SUITE.${KAFKA}_replaces_skua_1 c_kafka_replaces_1"
  "$SUITE.${KAFKA}_replaces_skua_2 c_kafka_replaces_2"
  "$SUITE.${KAFKA}_replaces_skua_3 c_kafka_replaces_3"
  "$SUITE.all_kafka_nothing_lost c_all_kafka_nothing_lost"
  "$SUITE.all_kafka_group_offsets c_all_kafka_group_offsets"
  "$SUITE.replica_logs_identical c_replica_logs_identical"
)

if [[ $SKUA == --skip ]]; then
  for c in "${CASES[@]}"; do echo "SKIP ${c%% *}: ${2:-not run}"; done
  exit 0
fi
B="" CP=""
t0=$SECONDS
for c in "${CASES[@]}"; do
  # shellcheck disable=SC2086  # "ID FUNCTION"
  run_case $c
  note "${c%% *} done at $((SECONDS - t0)) s"
done
exit 0
