#!/usr/bin/env bash
# skua compatibility suite: Apache Kafka's command-line tools (compat/bin/kafka-*.sh).
#   compat/java/tools.sh HOST:PORT
# Prints one PASS/FAIL line per case.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../lib/common.sh"
source "$here/../lib/cases.sh"
B=${1:?usage: tools.sh HOST:PORT}
BIN="$here/../bin"
export COMPAT_TOOL_TIMEOUT=${COMPAT_TOOL_TIMEOUT:-45}
T=$(uniq_name tools)      # topic for the kafka-topics.sh cases
C=$(uniq_name console)    # 1-partition topic for the console round trip
G=$(uniq_name group)      # consumer group
K=$(uniq_name compacted)  # compacted topic

topics() { "$BIN/kafka-topics.sh" --bootstrap-server "$B" "$@"; }

c_topics_create() {
  topics --create --topic "$T" --partitions 3 --replication-factor 1 >"$CASE_TMP/out" || return 1
  grep -q "Created topic $T" "$CASE_TMP/out" || fail "no 'Created topic' line: $(cat "$CASE_TMP/out")"
}
c_topics_list() {
  retry_until 15 bash -c "'$BIN/kafka-topics.sh' --bootstrap-server '$B' --list | grep -qx '$T'" \
    || fail "topic $T not in --list"
}
# check_describe TOPIC NPARTS: the --describe header and one line per partition with a
# leader, replicas == [leader] and isr == [leader]
check_describe() {
  topics --describe --topic "$1" >"$CASE_TMP/desc" || return 1
  cat "$CASE_TMP/desc"
  python3 - "$1" "$2" "$CASE_TMP/desc" >"$CASE_TMP/reason" <<'PY'
import re, sys
topic, n, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
text = open(path).read()
head = re.search(r"Topic: (\S+)\s+TopicId: (\S+)\s+PartitionCount: (\d+)\s+ReplicationFactor: (\d+)", text)
if not head or head.group(1) != topic:
    sys.exit(print("no header line for", topic) or 1)
if int(head.group(3)) != n or int(head.group(4)) != 1:
    sys.exit(print("header says", head.group(3), "partitions, rf", head.group(4)) or 1)
rows = re.findall(r"Topic: (\S+)\s+Partition: (\d+)\s+Leader: (-?\d+|none)\s+Replicas: (\S*)\s+Isr: (\S*)", text)
parts = sorted(int(r[1]) for r in rows)
if parts != list(range(n)):
    sys.exit(print("partition rows", parts) or 1)
for _, p, leader, replicas, isr in rows:
    if leader in ("none", "-1") or replicas != leader or isr != leader:
        sys.exit(print(f"partition {p}: leader={leader} replicas={replicas} isr={isr}") or 1)
PY
}
c_topics_describe() { check_describe "$T" 3; }
c_topics_alter() {
  topics --alter --topic "$T" --partitions 5 || return 1
  retry_until 15 check_describe "$T" 5
}
c_topics_delete() {
  topics --delete --topic "$T" || return 1
  retry_until 20 bash -c "! '$BIN/kafka-topics.sh' --bootstrap-server '$B' --list | grep -qx '$T'" \
    || fail "topic $T still listed after --delete"
}

console_produce() { # TOPIC [extra producer args]
  local topic=$1; shift
  for i in $(seq 1 20); do printf 'key-%d:value %d with spaces\n' "$i" "$i"; done \
    | "$BIN/kafka-console-producer.sh" --bootstrap-server "$B" --topic "$topic" \
        --property parse.key=true --property key.separator=: "$@"
}
expected_console() { for i in $(seq 1 20); do printf 'key-%d\tvalue %d with spaces\n' "$i" "$i"; done; }
console_consume() { # TOPIC [extra consumer args]
  local topic=$1; shift
  "$BIN/kafka-console-consumer.sh" --bootstrap-server "$B" --topic "$topic" \
    --max-messages 20 --timeout-ms 30000 --property print.key=true "$@" >"$CASE_TMP/got"
  expected_console >"$CASE_TMP/want"
  diff "$CASE_TMP/want" "$CASE_TMP/got" >"$CASE_TMP/diff" \
    || fail "console consumer output differs: $(head -c 300 "$CASE_TMP/diff" | tr '\n' ' ')"
}
c_console_roundtrip() {
  topics --create --topic "$C" --partitions 1 --replication-factor 1 >/dev/null || return 1
  console_produce "$C" || return 1
  console_consume "$C" --partition 0 --offset earliest
}
c_console_zstd() {
  local t; t=$(uniq_name console-zstd)
  topics --create --topic "$t" --partitions 1 --replication-factor 1 >/dev/null || return 1
  console_produce "$t" --compression-codec zstd || return 1
  console_consume "$t" --partition 0 --offset earliest
  local rc=$?; topics --delete --topic "$t" >/dev/null 2>&1; return $rc
}
# Without --group and without --partition, Kafka 4's console consumer subscribes with a
# random group (console-consumer-NNNNN), so this needs group support too. With
# --partition it uses assign() and no group state is created (c_console_roundtrip).
c_console_random_group() { console_consume "$C" --from-beginning; }
c_console_group() { console_consume "$C" --group "$G" --from-beginning; }
c_groups_list() {
  "$BIN/kafka-consumer-groups.sh" --bootstrap-server "$B" --list >"$CASE_TMP/out" || return 1
  grep -qx "$G" "$CASE_TMP/out" || fail "group $G not listed"
}
c_groups_describe() {
  "$BIN/kafka-consumer-groups.sh" --bootstrap-server "$B" --describe --group "$G" >"$CASE_TMP/out" || return 1
  cat "$CASE_TMP/out"
  # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...
  awk -v g="$G" -v t="$C" '$1==g && $2==t && $3=="0" && $4=="20" && $5=="20" && $6=="0" {ok=1} END {exit !ok}' \
    "$CASE_TMP/out" || fail "no row '$G $C 0 20 20 0' in --describe output"
}
c_configs_describe() {
  "$BIN/kafka-configs.sh" --bootstrap-server "$B" --entity-type topics --entity-name "$C" --describe \
    >"$CASE_TMP/out" || return 1
  grep -q "configs for topic $C are" "$CASE_TMP/out" || fail "unexpected output: $(head -c 200 "$CASE_TMP/out")"
}
c_configs_alter() {
  "$BIN/kafka-configs.sh" --bootstrap-server "$B" --entity-type topics --entity-name "$C" \
    --alter --add-config retention.ms=86400000,max.message.bytes=2000000 || return 1
  retry_until 10 bash -c "'$BIN/kafka-configs.sh' --bootstrap-server '$B' --entity-type topics --entity-name '$C' --describe \
    | grep -q 'retention.ms=86400000'" || fail "retention.ms=86400000 not shown after --alter"
}
# Group configs (resource type GROUP): set, shown, refused beyond the broker's bounds.
c_configs_group() {
  "$BIN/kafka-configs.sh" --bootstrap-server "$B" --entity-type groups --entity-name "$G-cfg" \
    --alter --add-config consumer.session.timeout.ms=50000 || return 1
  "$BIN/kafka-configs.sh" --bootstrap-server "$B" --entity-type groups --entity-name "$G-cfg" --describe \
    >"$CASE_TMP/out" || return 1
  grep -q "consumer.session.timeout.ms=50000" "$CASE_TMP/out" \
    || fail "consumer.session.timeout.ms=50000 not shown: $(head -c 300 "$CASE_TMP/out")"
  if "$BIN/kafka-configs.sh" --bootstrap-server "$B" --entity-type groups --entity-name "$G-cfg" \
    --alter --add-config consumer.session.timeout.ms=1 >"$CASE_TMP/bad" 2>&1; then
    fail "a session timeout below group.consumer.min.session.timeout.ms was accepted"
  fi
  grep -qi "InvalidConfigurationException\|InvalidRequestException\|must be\|not in" "$CASE_TMP/bad" \
    || fail "unexpected refusal: $(head -c 300 "$CASE_TMP/bad")"
}
# Dynamic broker configs: one broker's own (--entity-name) and the cluster default
# (--entity-default), reported with their sources, a read-only key refused as Kafka
# refuses it; removed again at the end so the other cases see the static config.
c_configs_broker() {
  local cfg="$BIN/kafka-configs.sh" id
  "$cfg" --bootstrap-server "$B" --entity-type brokers --describe >"$CASE_TMP/brokers" || return 1
  id=$(grep -o 'broker [0-9]*' "$CASE_TMP/brokers" | head -1 | cut -d' ' -f2)
  [ -n "$id" ] || fail "no broker id in: $(head -c 300 "$CASE_TMP/brokers")"
  "$cfg" --bootstrap-server "$B" --entity-type brokers --entity-name "$id" \
    --alter --add-config log.cleaner.backoff.ms=16000 || return 1
  "$cfg" --bootstrap-server "$B" --entity-type brokers --entity-default \
    --alter --add-config log.cleaner.backoff.ms=17000,log.cleaner.io.buffer.load.factor=0.8 || return 1
  "$cfg" --bootstrap-server "$B" --entity-type brokers --entity-name "$id" --describe --all \
    >"$CASE_TMP/all" || return 1
  grep -q "log.cleaner.backoff.ms=16000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.backoff.ms=16000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.backoff.ms=17000, DEFAULT_CONFIG:log.cleaner.backoff.ms=15000}" "$CASE_TMP/all" \
    || fail "per-broker value not shown: $(grep 'log.cleaner.backoff.ms=' "$CASE_TMP/all" | head -c 400)"
  grep -q "log.cleaner.io.buffer.load.factor=0.8 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.io.buffer.load.factor=0.8" "$CASE_TMP/all" \
    || fail "cluster default not shown: $(grep 'load.factor=' "$CASE_TMP/all" | head -c 400)"
  "$cfg" --bootstrap-server "$B" --entity-type brokers --entity-default --describe >"$CASE_TMP/default" || return 1
  grep -q "log.cleaner.io.buffer.load.factor=0.8" "$CASE_TMP/default" \
    || fail "--entity-default --describe: $(head -c 300 "$CASE_TMP/default")"
  if "$cfg" --bootstrap-server "$B" --entity-type brokers --entity-name "$id" \
    --alter --add-config num.partitions=3 >"$CASE_TMP/bad" 2>&1; then
    fail "read-only num.partitions was changed"
  fi
  grep -q "Cannot update these configs dynamically: Set(num.partitions)" "$CASE_TMP/bad" \
    || fail "unexpected refusal: $(head -c 300 "$CASE_TMP/bad")"
  "$cfg" --bootstrap-server "$B" --entity-type brokers --entity-name "$id" \
    --alter --delete-config log.cleaner.backoff.ms || return 1
  "$cfg" --bootstrap-server "$B" --entity-type brokers --entity-default \
    --alter --delete-config log.cleaner.backoff.ms,log.cleaner.io.buffer.load.factor || return 1
  "$cfg" --bootstrap-server "$B" --entity-type brokers --entity-name "$id" --describe >"$CASE_TMP/after" || return 1
  ! grep -q "log.cleaner" "$CASE_TMP/after" || fail "dynamic configs left: $(cat "$CASE_TMP/after")"
}
# A broker's loggers (resource BROKER_LOGGER): listed with their levels, one set to
# DEBUG and shown so, an unknown one refused by the tool, then unset back to its level.
c_configs_broker_loggers() {
  local cfg="$BIN/kafka-configs.sh" id before
  "$cfg" --bootstrap-server "$B" --entity-type brokers --describe >"$CASE_TMP/brokers" || return 1
  id=$(grep -o 'broker [0-9]*' "$CASE_TMP/brokers" | head -1 | cut -d' ' -f2)
  [ -n "$id" ] || fail "no broker id in: $(head -c 300 "$CASE_TMP/brokers")"
  loggers() { "$cfg" --bootstrap-server "$B" --entity-type broker-loggers --entity-name "$id" "$@"; }
  loggers --describe >"$CASE_TMP/before" || return 1
  grep -q "^  root=[A-Z]* sensitive=false synonyms={}" "$CASE_TMP/before" \
    || fail "no root logger: $(head -c 300 "$CASE_TMP/before")"
  before=$(grep "^  kafka.server.ReplicaManager=" "$CASE_TMP/before") \
    || fail "no kafka.server.ReplicaManager logger: $(head -c 300 "$CASE_TMP/before")"
  loggers --alter --add-config kafka.server.ReplicaManager=DEBUG || return 1
  loggers --describe >"$CASE_TMP/set" || return 1
  grep -qx "  kafka.server.ReplicaManager=DEBUG sensitive=false synonyms={}" "$CASE_TMP/set" \
    || fail "DEBUG not shown: $(grep ReplicaManager "$CASE_TMP/set")"
  if loggers --alter --add-config no.such.Logger=DEBUG >"$CASE_TMP/bad" 2>&1; then
    fail "an unknown logger was accepted"
  fi
  grep -q "Invalid broker logger(s): no.such.Logger" "$CASE_TMP/bad" \
    || fail "unexpected refusal: $(head -c 300 "$CASE_TMP/bad")"
  loggers --alter --delete-config kafka.server.ReplicaManager || return 1
  loggers --describe >"$CASE_TMP/after" || return 1
  grep -qxF "$before" "$CASE_TMP/after" \
    || fail "after unsetting: $(grep ReplicaManager "$CASE_TMP/after"), before: $before"
}
# A compacted topic written with 3,000 updates of 30 keys (about 3 MB, so segments
# roll and the cleaner can reach them) is read back by the console consumer: fewer
# records than were written, and the latest value of every key.
compacted_readback() {
  "$BIN/kafka-console-consumer.sh" --bootstrap-server "$B" --topic "$K" --from-beginning \
    --property print.key=true --property key.separator=: --timeout-ms 8000 >"$CASE_TMP/read" 2>/dev/null
  python3 - "$CASE_TMP/read" >"$CASE_TMP/reason" <<'PY'
import sys
rows = [l.rstrip("\n").split(":", 1) for l in open(sys.argv[1]) if ":" in l]
latest = {}
for k, v in rows:
    latest[k] = v.split("-", 1)[0]
want = {f"k{j}": str(2970 + j) for j in range(30)}
if latest != want:
    sys.exit(print("latest values differ:", sorted(set(latest.items()) ^ set(want.items()))[:4]) or 1)
if len(rows) >= 3000:
    sys.exit(print(len(rows), "records read: not compacted yet") or 1)
PY
}
c_compacted() {
  topics --create --topic "$K" --partitions 1 --replication-factor 1 --config cleanup.policy=compact \
    --config segment.bytes=1048576 --config min.cleanable.dirty.ratio=0.01 >/dev/null || return 1
  local pad; pad=$(head -c 1000 /dev/zero | tr '\0' x)
  for i in $(seq 0 2999); do printf 'k%d:%d-%s\n' $((i % 30)) "$i" "$pad"; done \
    | "$BIN/kafka-console-producer.sh" --bootstrap-server "$B" --topic "$K" \
      --property parse.key=true --property key.separator=: || return 1
  retry_until 90 compacted_readback || fail "$(cat "$CASE_TMP/reason")"
}
c_get_offsets() {
  "$BIN/kafka-get-offsets.sh" --bootstrap-server "$B" --topic "$C" --time latest >"$CASE_TMP/out" || return 1
  grep -qx "$C:0:20" "$CASE_TMP/out" || fail "latest: want $C:0:20, got $(cat "$CASE_TMP/out")"
  "$BIN/kafka-get-offsets.sh" --bootstrap-server "$B" --topic "$C" --time earliest >"$CASE_TMP/out" || return 1
  grep -qx "$C:0:0" "$CASE_TMP/out" || fail "earliest: want $C:0:0, got $(cat "$CASE_TMP/out")"
}
c_delete_records() {
  printf '{"version":1,"partitions":[{"topic":"%s","partition":0,"offset":5}]}' "$C" >"$CASE_TMP/del.json"
  "$BIN/kafka-delete-records.sh" --bootstrap-server "$B" --offset-json-file "$CASE_TMP/del.json" || return 1
  "$BIN/kafka-get-offsets.sh" --bootstrap-server "$B" --topic "$C" --time earliest >"$CASE_TMP/out" || return 1
  grep -qx "$C:0:5" "$CASE_TMP/out" || fail "earliest after delete-records: want $C:0:5, got $(cat "$CASE_TMP/out")"
  # A consumer positioned at 0, now below the low watermark, is reset to it
  # (OFFSET_OUT_OF_RANGE, then auto.offset.reset=earliest).
  "$BIN/kafka-console-consumer.sh" --bootstrap-server "$B" --topic "$C" --partition 0 --offset 0 \
    --consumer-property auto.offset.reset=earliest --max-messages 15 --timeout-ms 30000 \
    --property print.offset=true >"$CASE_TMP/reset" || return 1
  head -n1 "$CASE_TMP/reset" | grep -q '^Offset:5' || fail "consumer from 0 not reset to 5: $(head -n1 "$CASE_TMP/reset")"
  [[ $(wc -l <"$CASE_TMP/reset") -eq 15 ]] || fail "want 15 records after the reset, got $(wc -l <"$CASE_TMP/reset")"
}
# kafka-log-dirs.sh --describe: the console topic's partition in one of the broker's log
# dirs, with the size its segment files have on disk (the broker runs on this machine).
c_log_dirs() {
  "$BIN/kafka-log-dirs.sh" --bootstrap-server "$B" --describe --topic-list "$C" >"$CASE_TMP/out" || return 1
  cat "$CASE_TMP/out"
  python3 - "$C" "$CASE_TMP/out" >"$CASE_TMP/reason" <<'PY' || fail "$(cat "$CASE_TMP/reason")"
import glob, json, os, sys
topic, path = sys.argv[1], sys.argv[2]
lines = [l for l in open(path) if l.startswith("{")]
if not lines:
    sys.exit(print("no JSON line in the output") or 1)
doc = json.loads(lines[-1])
found = []
for broker in doc["brokers"]:
    for d in broker["logDirs"]:
        if d["error"] is not None:
            sys.exit(print(f"log dir {d['logDir']}: error {d['error']}") or 1)
        for p in d["partitions"]:
            found.append((d["logDir"], p))
if [p["partition"] for _, p in found] != [f"{topic}-0"]:
    sys.exit(print("partitions listed:", [p["partition"] for _, p in found]) or 1)
log_dir, p = found[0]
if p["offsetLag"] != 0 or p["isFuture"]:
    sys.exit(print("offsetLag/isFuture:", p) or 1)
on_disk = sum(os.path.getsize(f) for f in glob.glob(os.path.join(log_dir, f"{topic}-0", "*.log")))
if on_disk == 0 or p["size"] != on_disk:
    sys.exit(print(f"size {p['size']}, segment files in {log_dir} hold {on_disk}") or 1)
PY
}
c_api_versions() {
  "$BIN/kafka-broker-api-versions.sh" --bootstrap-server "$B" >"$CASE_TMP/out" || return 1
  for api in Produce Fetch ListOffsets Metadata ApiVersions CreateTopics DeleteTopics; do
    grep -q "$api(" "$CASE_TMP/out" || fail "$api missing from broker-api-versions output"
  done
}
# Client quotas (AlterClientQuotas / DescribeClientQuotas): a client id's, a user's
# client ids' default, and a user's (altered and deleted; `--describe --entity-type users`
# alone is java.configs.user_quotas), shown and removed again. Only entities no other
# case's client uses, so nothing running beside this is throttled.
c_configs_quotas() {
  local cfg="$BIN/kafka-configs.sh" u c
  u=$(uniq_name quser) c=$(uniq_name qclient)
  "$cfg" --bootstrap-server "$B" --alter --add-config producer_byte_rate=1024,request_percentage=50 \
    --entity-type users --entity-name "$u" || return 1
  "$cfg" --bootstrap-server "$B" --alter --add-config consumer_byte_rate=4096 \
    --entity-type users --entity-name "$u" --entity-type clients --entity-default || return 1
  "$cfg" --bootstrap-server "$B" --alter --add-config producer_byte_rate=2048,controller_mutation_rate=10 \
    --entity-type clients --entity-name "$c" || return 1
  "$cfg" --bootstrap-server "$B" --describe --entity-type users --entity-name "$u" \
    --entity-type clients --entity-default >"$CASE_TMP/both" || return 1
  grep -q "consumer_byte_rate=4096.0" "$CASE_TMP/both" \
    || fail "user + default client quota not shown: $(head -c 300 "$CASE_TMP/both")"
  "$cfg" --bootstrap-server "$B" --describe --entity-type clients --entity-name "$c" >"$CASE_TMP/client" || return 1
  grep -q "controller_mutation_rate=10.0" "$CASE_TMP/client" && grep -q "producer_byte_rate=2048.0" "$CASE_TMP/client" \
    || fail "client quotas not shown: $(head -c 300 "$CASE_TMP/client")"
  if "$cfg" --bootstrap-server "$B" --alter --add-config producer_byte_rate=1.5 \
    --entity-type clients --entity-name "$c" >"$CASE_TMP/bad" 2>&1; then
    fail "a fractional producer_byte_rate was accepted"
  fi
  "$cfg" --bootstrap-server "$B" --alter --delete-config producer_byte_rate \
    --entity-type clients --entity-name "$c" || return 1
  "$cfg" --bootstrap-server "$B" --describe --entity-type clients --entity-name "$c" >"$CASE_TMP/after" || return 1
  ! grep -q "producer_byte_rate" "$CASE_TMP/after" || fail "deleted quota still shown: $(cat "$CASE_TMP/after")"
  "$cfg" --bootstrap-server "$B" --alter --delete-config producer_byte_rate,request_percentage \
    --entity-type users --entity-name "$u" || return 1
  "$cfg" --bootstrap-server "$B" --alter --delete-config consumer_byte_rate \
    --entity-type users --entity-name "$u" --entity-type clients --entity-default || return 1
  "$cfg" --bootstrap-server "$B" --alter --delete-config controller_mutation_rate \
    --entity-type clients --entity-name "$c" || return 1
}
# `--describe --entity-type users` also describes the user's SCRAM credentials
# (DescribeUserScramCredentials).
c_configs_user_quotas() {
  local cfg="$BIN/kafka-configs.sh" u
  u=$(uniq_name quser)
  "$cfg" --bootstrap-server "$B" --alter --add-config producer_byte_rate=1024 \
    --entity-type users --entity-name "$u" || return 1
  "$cfg" --bootstrap-server "$B" --describe --entity-type users --entity-name "$u" >"$CASE_TMP/user" 2>&1
  local ok=$?
  "$cfg" --bootstrap-server "$B" --alter --delete-config producer_byte_rate \
    --entity-type users --entity-name "$u" >/dev/null 2>&1
  ((ok == 0)) || fail "describe failed: $(grep -m1 Exception "$CASE_TMP/user")"
  grep -q "producer_byte_rate=1024.0" "$CASE_TMP/user" || fail "user quota not shown: $(head -c 300 "$CASE_TMP/user")"
}
# A Java producer over its client id's producer_byte_rate: told throttle times, and held
# within 20 % of the quota once settled (the perf tool's second 5-second report; the
# first spends the allowance a new rate starts with). The broker runs with
# quota.window.num=2, so that allowance is one second of the quota.
c_producer_quota() {
  local t c rate
  t=$(uniq_name quota) c=$(uniq_name qproducer)
  topics --create --topic "$t" --partitions 1 --replication-factor 1 >/dev/null || return 1
  "$BIN/kafka-configs.sh" --bootstrap-server "$B" --alter --add-config producer_byte_rate=500000 \
    --entity-type clients --entity-name "$c" || return 1
  "$BIN/kafka-producer-perf-test.sh" --topic "$t" --num-records 6000 --record-size 1000 --throughput -1 \
    --print-metrics --producer-props bootstrap.servers="$B" client.id="$c" acks=1 >"$CASE_TMP/out" || return 1
  grep 'records sent' "$CASE_TMP/out"
  grep 'produce-throttle-time-max' "$CASE_TMP/out"
  rate=$(grep 'records sent' "$CASE_TMP/out" | grep -v '50th' | sed -n '2s/^[0-9]* records sent, \([0-9.]*\) records\/sec.*/\1/p')
  [[ -n $rate ]] || fail "no second report: $(tr '\n' ' ' <"$CASE_TMP/out" | head -c 300)"
  awk -v r="$rate" 'BEGIN {b = r * 1000; exit !(b >= 400000 && b <= 600000)}' \
    || fail "produced at $rate records/s of 1000 bytes against a quota of 500000 bytes/s"
  awk '/produce-throttle-time-max/ && $NF+0 > 0 {ok=1} END {exit !ok}' "$CASE_TMP/out" \
    || fail "the producer saw no throttle time"
}
c_producer_perf() {
  local t; t=$(uniq_name perf)
  topics --create --topic "$t" --partitions 2 --replication-factor 1 >/dev/null || return 1
  "$BIN/kafka-producer-perf-test.sh" --topic "$t" --num-records 50000 --record-size 200 --throughput -1 \
    --producer-props bootstrap.servers="$B" acks=all linger.ms=5 compression.type=lz4 >"$CASE_TMP/out" || return 1
  grep -q '^50000 records sent' "$CASE_TMP/out" || fail "no '50000 records sent' summary: $(tail -n1 "$CASE_TMP/out")"
  echo "$t" >"$CASE_TMP/perf-topic"
}
c_consumer_perf() {
  local t; t=$(cat "$CASE_TMP/perf-topic" 2>/dev/null) || fail "producer perf case did not run"
  "$BIN/kafka-consumer-perf-test.sh" --bootstrap-server "$B" --topic "$t" --messages 50000 --timeout 30000 \
    >"$CASE_TMP/out" || return 1
  cat "$CASE_TMP/out"
  # csv row: start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, ...
  awk -F', *' 'NR>1 && $5+0 >= 50000 {ok=1} END {exit !ok}' "$CASE_TMP/out" \
    || fail "did not consume 50000 records: $(tail -n1 "$CASE_TMP/out")"
}

run_case java.topics.create c_topics_create
run_case java.topics.list c_topics_list
run_case java.topics.describe c_topics_describe
run_case java.topics.alter_partitions c_topics_alter
run_case java.topics.delete c_topics_delete
run_case java.tools.broker_api_versions c_api_versions
run_case java.console.roundtrip c_console_roundtrip
run_case java.console.zstd c_console_zstd
run_case java.console.random_group c_console_random_group
run_case java.console.group c_console_group
run_case java.consumer_groups.list c_groups_list
run_case java.consumer_groups.describe c_groups_describe
run_case java.configs.describe_topic c_configs_describe
run_case java.configs.alter_topic c_configs_alter
run_case java.configs.group c_configs_group
run_case java.configs.broker c_configs_broker
run_case java.configs.quotas c_configs_quotas
run_case java.configs.user_quotas c_configs_user_quotas
run_case java.configs.broker_loggers c_configs_broker_loggers
run_case java.tools.compacted_readback c_compacted
run_case java.tools.get_offsets c_get_offsets
run_case java.tools.delete_records c_delete_records
run_case java.tools.log_dirs c_log_dirs
run_case java.perf.producer c_producer_perf
run_case java.perf.consumer c_consumer_perf
run_case java.perf.producer_quota c_producer_quota
"$BIN/kafka-topics.sh" --bootstrap-server "$B" --delete --topic "$C" >/dev/null 2>&1 || true
[[ -s $CASE_TMP/perf-topic ]] && "$BIN/kafka-topics.sh" --bootstrap-server "$B" --delete --topic "$(cat "$CASE_TMP/perf-topic")" >/dev/null 2>&1
exit 0
