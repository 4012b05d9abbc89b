#!/usr/bin/env bash
# skua compatibility suite: a Kafka Streams application (compat/apps/WordCount.java, the
# kafka-streams jar from Maven Central) run unchanged against the broker.
#   compat/apps/streams.sh HOST:PORT
# Prints one PASS/FAIL line per case.
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
wordcount() {
  timeout -k 5 150 java -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dlog4j2.configurationFile="$(tools_log4j)" -Dguarantee="$GUARANTEE" -cp "$LIBS/*" "$here/WordCount.java" \
    "$B" "$APP" "$IN" "$OUT" "$STATE" 90 "$@" >"$CASE_TMP/app" 2>&1
  local rc=$?
  ((rc == 0)) || fail "$(grep -v '^\s*$' "$CASE_TMP/app" | grep -v '^\s*at ' | tail -n 4 | tr '\n' ' ' | head -c 380)"
  return $rc
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
