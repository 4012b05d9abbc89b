#!/usr/bin/env bash
# skua compatibility suite: a Kafka Streams application (compat/apps/WordCount.java, the
# kafka-streams jar from Maven Central) run unchanged against the broker.
#   compat/apps/streams.sh HOST:PORT
# Prints one PASS/FAIL line per case. streams.eos_kill9 starts a skua broker of its own
# (it kills it), so it needs SKUA_BIN (exported by scripts/compat); SKIP without it.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../lib/common.sh"
source "$here/../lib/cases.sh"
B=${1:?usage: streams.sh HOST:PORT}
BIN="$here/../bin"
export COMPAT_TOOL_TIMEOUT=${COMPAT_TOOL_TIMEOUT:-45}
LIBS=$(apps_libs)
APP=$(uniq_name wordcount)   # application.id: prefix of its internal topics
IN="$APP-input" OUT="$APP-output"
STATE="$CASE_TMP/state"

topics() { "$BIN/kafka-topics.sh" --bootstrap-server "$B" "$@"; }
lines() { printf '%s\n' "$@" | "$BIN/kafka-console-producer.sh" --bootstrap-server "$B" --topic "$IN"; }
GUARANTEE=at_least_once
FETCH_LIMIT=""   # when set, the application's consumers' max.partition.fetch.bytes
wordcount() {
  timeout -k 5 150 java -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dlog4j2.configurationFile="$(tools_log4j)" -Dguarantee="$GUARANTEE" \
    ${FETCH_LIMIT:+-DmaxPartitionFetchBytes=$FETCH_LIMIT} -cp "$LIBS/*" "$here/WordCount.java" \
    "$B" "$APP" "$IN" "$OUT" "$STATE" 90 "$@" >"$CASE_TMP/app" 2>&1
  local rc=$?
  ((rc == 0)) || fail "$(app_failure "$CASE_TMP/app")"
  return $rc
}
# The last lines of an application's output that say why it failed.
app_failure() {
  grep -v '^\s*$' "$1" | grep -v '^\s*at ' | grep -v '^progress ' | tail -n 4 | tr '\n' ' ' | head -c 380
}

# Word count over two input partitions, at_least_once: groupBy repartitions, count keeps
# its store in a changelog topic.
c_wordcount() {
  topics --create --topic "$IN" --partitions 2 --replication-factor 1 >/dev/null || return 1
  topics --create --topic "$OUT" --partitions 1 --replication-factor 1 >/dev/null || return 1
  lines "the quick brown fox" "the lazy dog" "The fox" || return 1
  wordcount the=3 quick=1 brown=1 fox=2 lazy=1 dog=1
}
# The application's internal topics as Streams asked for them: the changelog compacted,
# the repartition topic purged by DeleteRecords once its records are processed.
c_internal_topics() {
  "$BIN/kafka-configs.sh" --bootstrap-server "$B" --entity-type topics \
    --entity-name "$APP-counts-changelog" --describe >"$CASE_TMP/changelog" || return 1
  grep -q "cleanup.policy=compact" "$CASE_TMP/changelog" \
    || fail "changelog not compacted: $(head -c 300 "$CASE_TMP/changelog")"
  "$BIN/kafka-get-offsets.sh" --bootstrap-server "$B" --topic "$APP-counts-repartition" \
    --time earliest >"$CASE_TMP/earliest" || return 1
  # at least one partition's records were purged (DeleteRecords moved its start)
  grep -q ':[1-9][0-9]*$' "$CASE_TMP/earliest" \
    || fail "repartition topic not purged: $(tr '\n' ' ' <"$CASE_TMP/earliest")"
}
# Restarted with the same application.id and a fresh state dir: the counts go on from
# the committed offsets and the store restored from its changelog.
c_restart() {
  rm -rf "$STATE"
  lines "fox and dog" "the end" || return 1
  wordcount the=4 quick=1 brown=1 fox=3 lazy=1 dog=2 and=1 end=1
}

run_case streams.wordcount c_wordcount
run_case streams.internal_topics c_internal_topics
run_case streams.restart c_restart
# The same word count with processing.guarantee=exactly_once_v2 (transactions,
# sendOffsetsToTransaction), its output read read_committed; then restarted with a fresh
# state dir: the counts go on from the offsets committed in its transactions.
APP=$(uniq_name wordcount-eos) GUARANTEE=exactly_once_v2
IN="$APP-input" OUT="$APP-output" STATE="$CASE_TMP/state-eos"
run_case streams.eos_wordcount c_wordcount
run_case streams.eos_restart c_restart

# Exactly-once with the consumers' max.partition.fetch.bytes at 16384 over batches larger
# than that: a Kafka Streams application run so lost its stream threads to "Failed to make
# progress reading messages" when a fetch answered a partition with only a cut-off piece
# of a batch (KIP-74: the first batch is returned whole). 12000 lines written in ~64 KiB
# batches to both input partitions (one fetch asks for both), and the application's
# producer writing batches of up to 256 KiB to the repartition topic (WordCount.java),
# which it reads back under the same limit. Exact counts, and no stream thread may die.
# An application of its own: a restarted one would first wait out its predecessor's
# session timeout (Streams does not leave its group on close).
c_eos_small_fetch() {
  topics --create --topic "$IN" --partitions 2 --replication-factor 1 >/dev/null || return 1
  topics --create --topic "$OUT" --partitions 1 --replication-factor 1 >/dev/null || return 1
  local i want
  for ((i = 0; i < 12000; i++)); do echo "w$((i % 61)) v$((i % 23))"; done >"$CASE_TMP/big-lines"
  "$BIN/kafka-console-producer.sh" --bootstrap-server "$B" --topic "$IN" \
    --producer-property batch.size=65536 --producer-property compression.type=none \
    <"$CASE_TMP/big-lines" || return 1
  mapfile -t want < <(tr ' ' '\n' <"$CASE_TMP/big-lines" | sort | uniq -c | awk '{print $2 "=" $1}')
  FETCH_LIMIT=16384 wordcount "${want[@]}"
  local rc=$?
  # the first thread death, rather than what followed it, as the reason
  local died; died=$(grep -m1 -E 'stream thread died|Failed to make progress' "$CASE_TMP/app")
  [[ -z $died ]] || { fail "${died:0:380}"; return 1; }
  return $rc
}
APP=$(uniq_name wordcount-fetch)
IN="$APP-input" OUT="$APP-output" STATE="$CASE_TMP/state-fetch"
run_case streams.eos_small_fetch c_eos_small_fetch

# Exactly-once through kill -9: the word count at exactly_once_v2 over input written in
# three batches, its output read read_committed. The first two batches are written at a
# steady pace while the application runs, so it is in the middle of a transaction when it
# is killed (SIGKILL) as soon as it has committed output, in each of its first two runs, and
# when the broker is killed, during the second run (then restarted on its data dir, the
# application and the writer still running). A third run must end with every word's exact
# count: a record processed twice (a transaction's output or offsets surviving its abort,
# a zombie not fenced) or lost would show as a wrong count. On a private broker, since it
# is killed.
KB="" KB_PORT="" KB_PID="" KB_DATA=""
kb_start() {
  # shellcheck disable=SC2086  # SKUA_BIN may carry arguments (scripts/compat --broker CMD)
  $SKUA_BIN --override "listeners=PLAINTEXT://127.0.0.1:$KB_PORT" \
    --override "advertised.listeners=PLAINTEXT://127.0.0.1:$KB_PORT" \
    --override "log.dirs=$KB_DATA" >>"$CASE_TMP/kill9-broker.log" 2>&1 &
  KB_PID=$!
  wait_port 127.0.0.1 "$KB_PORT" 60 "$KB_PID" \
    || fail "the private broker did not start: $(tail -n 3 "$CASE_TMP/kill9-broker.log" | tr '\n' ' ')"
}
kb_stop() { [[ -z $KB_PID ]] || { kill -9 "$KB_PID" 2>/dev/null; wait "$KB_PID" 2>/dev/null; KB_PID=""; }; }
APP_PID=""
app_start() { # RUN: the word count in the background, output in $CASE_TMP/app-RUN
  java -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dlog4j2.configurationFile="$(tools_log4j)" -Dguarantee=exactly_once_v2 -cp "$LIBS/*" \
    "$here/WordCount.java" "$KB" "$APP" "$IN" "$OUT" "$STATE" 200 "${EXPECTED[@]}" \
    >"$CASE_TMP/app-$1" 2>&1 &
  APP_PID=$!
}
app_kill() { kill -9 "$APP_PID" 2>/dev/null; wait "$APP_PID" 2>/dev/null; APP_PID=""; }
progress() { # RUN: committed output records the run's reader has seen
  local n; n=$(grep '^progress ' "$CASE_TMP/app-$1" 2>/dev/null | tail -n 1 | cut -d' ' -f2)
  echo "${n:-0}"
}
wait_progress() { # RUN BEYOND SECONDS: until the run's reader has seen more than BEYOND records
  local deadline=$((SECONDS + $3))
  while (($(progress "$1") <= $2)); do
    kill -0 "$APP_PID" 2>/dev/null || { fail "run $1 ended: $(app_failure "$CASE_TMP/app-$1")"; return 1; }
    ((SECONDS < deadline)) || { fail "run $1 committed no output beyond $2 records in $3 s"; return 1; }
    sleep 0.2
  done
}
batch() { # N: input lines of batch N, two words each (a repartition of every record)
  local i
  for ((i = 0; i < 4000; i++)); do echo "w$(((i * 7 + $1) % 61)) v$(((i + $1) % 23))"; done
}
FEEDER=""
feed() { # N: writes batch N in the background, 50 lines every 0.5 s (about 40 s)
  batch "$1" | while mapfile -t -n 50 chunk && ((${#chunk[@]})); do
    printf '%s\n' "${chunk[@]}"; sleep 0.5
  done | COMPAT_TOOL_TIMEOUT=240 "$BIN/kafka-console-producer.sh" --bootstrap-server "$KB" \
    --topic "$IN" >"$CASE_TMP/feed-$1" 2>&1 &
  FEEDER=$!
}
writing() { kill -0 "$FEEDER" 2>/dev/null && echo ", its input still being written"; }
fed() { # N: waits for the writer of batch N, which must have written all of it
  wait "$FEEDER" || { fail "writing batch $1 failed: $(app_failure "$CASE_TMP/feed-$1")"; return 1; }
  FEEDER=""
}
c_eos_kill9() {
  KB_PORT=$(free_port) KB_DATA="$CASE_TMP/kill9-data" KB="127.0.0.1:$KB_PORT"
  kb_start || return 1
  "$BIN/kafka-topics.sh" --bootstrap-server "$KB" --create --topic "$IN" --partitions 2 \
    --replication-factor 1 >/dev/null || return 1
  "$BIN/kafka-topics.sh" --bootstrap-server "$KB" --create --topic "$OUT" --partitions 1 \
    --replication-factor 1 >/dev/null || return 1
  { batch 1; batch 2; batch 3; } >"$CASE_TMP/all-lines"
  mapfile -t EXPECTED < <(tr ' ' '\n' <"$CASE_TMP/all-lines" | sort | uniq -c | awk '{print $2 "=" $1}')
  app_start 1
  feed 1
  wait_progress 1 0 150 || return 1
  app_kill
  echo "run 1 killed after $(progress 1) committed output records$(writing)"
  fed 1 || return 1
  app_start 2
  feed 2
  wait_progress 2 "$(progress 1)" 150 || return 1
  local seen; seen=$(progress 2)
  kb_stop
  echo "broker killed during run 2 after $seen committed output records$(writing)"
  kb_start || return 1
  wait_progress 2 "$seen" 150 || return 1
  app_kill
  echo "run 2 killed after $(progress 2) committed output records$(writing)"
  fed 2 || return 1
  batch 3 | "$BIN/kafka-console-producer.sh" --bootstrap-server "$KB" --topic "$IN" || return 1
  app_start 3
  wait "$APP_PID" || { fail "run 3: $(app_failure "$CASE_TMP/app-3")"; return 1; }
  APP_PID=""
  grep -q '^counts ok' "$CASE_TMP/app-3" || { fail "run 3: $(app_failure "$CASE_TMP/app-3")"; return 1; }
}
if [[ -n ${SKUA_BIN:-} ]]; then
  APP=$(uniq_name wordcount-kill9)
  IN="$APP-input" OUT="$APP-output" STATE="$CASE_TMP/state-kill9"
  run_case streams.eos_kill9 c_eos_kill9
  [[ -z $APP_PID ]] || app_kill
  [[ -z $FEEDER ]] || kill "$FEEDER" 2>/dev/null
  kb_stop
else
  echo "SKIP streams.eos_kill9: needs the skua binary (not run with --kafka or --bootstrap)"
fi
