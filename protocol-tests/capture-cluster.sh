#!/usr/bin/env bash
# Captures Apache Kafka 3.9.1's inter-broker traffic in ZooKeeper mode: a 3-broker cluster
# (scripts/cluster, inter.broker.protocol.version=3.9) whose brokers advertise a recording
# proxy (capture.py) in front of each of them, so every controller -> broker request
# (LeaderAndIsr, UpdateMetadata, StopReplica), broker -> controller request
# (ControlledShutdown, AlterPartition, AllocateProducerIds) and follower Fetch passes one.
#
#   COMPAT_CACHE=/work/compat-cache protocol-tests/capture-cluster.sh
#
# Writes protocol-tests/fixtures-cluster/kafka-3.9.1-to-broker-<i>/<Api>-v<v>-<n>{,.resp}.bin
# (what broker i received, and its answer) and fixtures-cluster/MANIFEST.tsv, replacing
# the previous capture. The scenario: create a topic (LeaderAndIsr, UpdateMetadata), an
# idempotent producer (AllocateProducerIds; follower Fetches carry its records), SIGSTOP a
# follower past replica.lag.time.max.ms and SIGCONT it (AlterPartition shrinking and
# expanding the ISR), SIGKILL it until its ZooKeeper session expires (leader changes),
# restart it after its session expired, delete the topic (StopReplica with deletion), and SIGTERM a broker
# (ControlledShutdown, StopReplica without deletion). About three minutes.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO_ROOT=$(cd "$HERE/.." && pwd)
source "$REPO_ROOT/compat/lib/common.sh"
log() { printf '[capture-cluster] %s\n' "$*" >&2; }

OUT="$HERE/fixtures-cluster"
# Fetch, LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown, AlterPartition,
# AllocateProducerIds.
APIS=1,4,5,6,7,56,67
TOPIC=cluster-capture
dir=$(mktemp -d "${TMPDIR:-/tmp}/skua-capture-cluster.XXXXXX")
proxies=()
cleanup() {
  "$REPO_ROOT/scripts/cluster" stop "$dir" >/dev/null 2>&1 || true
  for p in "${proxies[@]}"; do kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

libs=$(kafka_libs 3.9.1)
kafka() { java -Dlog4j.configuration="file:$dir/log4j-quiet.properties" -cp "$libs/*" "$@"; }

rm -rf "$OUT"
mkdir -p "$OUT"
listen=() advertised=()
for i in 1 2 3; do
  listen+=("$(free_port)")
  advertised+=("$(free_port)")
  python3 "$HERE/capture.py" --listen "127.0.0.1:${advertised[-1]}" \
    --upstream "127.0.0.1:${listen[-1]}" --client "kafka-3.9.1-to-broker-$i" \
    --client-version 3.9.1 --out "$OUT" --apis "$APIS" --max-per-version 12 \
    2>>"$dir/proxy-$i.log" &
  proxies+=($!)
done

bootstrap=$("$REPO_ROOT/scripts/cluster" start 3 --dir "$dir" \
  --ports "$(IFS=,; echo "${listen[*]}")" --advertised-ports "$(IFS=,; echo "${advertised[*]}")" \
  --override replica.lag.time.max.ms=3000 --override replica.fetch.wait.max.ms=2500 \
  --override zookeeper.session.timeout.ms=18000 \
  --override controlled.shutdown.enable=true)
log "cluster up: $bootstrap"

kafka org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" --create \
  --topic "$TOPIC" --partitions 3 --replication-factor 3 2>/dev/null
sleep 3
seq 1 20 | sed 's/.*/&:&/' | kafka kafka.tools.ConsoleProducer --bootstrap-server "$bootstrap" \
  --topic "$TOPIC" --property parse.key=true --property key.separator=: \
  --producer-property enable.idempotence=true --producer-property acks=all 2>/dev/null
sleep 3

log "SIGSTOP broker 3 (ISR shrink), then SIGCONT (ISR expand)"
# Stopped for less than the ZooKeeper session timeout (18 s) but longer than
# replica.lag.time.max.ms (3 s): the leaders on brokers 1 and 2, which get records
# meanwhile, drop broker 3 from their ISR themselves (AlterPartition), and take it back once
# it has caught up. Records for partitions broker 3 leads wait for it.
kill -STOP "$(cat "$dir/broker-3/pid")"
seq 21 60 | sed 's/.*/&:&/' | kafka kafka.tools.ConsoleProducer --bootstrap-server "$bootstrap" \
  --topic "$TOPIC" --property parse.key=true --property key.separator=: \
  --producer-property acks=1 2>/dev/null &
producer=$!
sleep 9
kill -CONT "$(cat "$dir/broker-3/pid")"
wait "$producer" || true
sleep 8

log "SIGKILL broker 3 (session expiry, new leaders), then restart it"
"$REPO_ROOT/scripts/cluster" kill "$dir" 3
sleep 24
"$REPO_ROOT/scripts/cluster" restart "$dir" 3
sleep 12

log "delete the topic (StopReplica with deletion)"
kafka org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" --delete --topic "$TOPIC" 2>/dev/null
sleep 5

log "second topic, then SIGTERM broker 2 (ControlledShutdown)"
kafka org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" --create \
  --topic "$TOPIC-2" --partitions 3 --replication-factor 3 2>/dev/null
sleep 5
"$REPO_ROOT/scripts/cluster" term "$dir" 2
sleep 3
"$REPO_ROOT/scripts/cluster" stop "$dir"
sleep 1
log "captured: $(tail -n +2 "$OUT/MANIFEST.tsv" | wc -l) frames"
cut -f5,6 "$OUT/MANIFEST.tsv" | tail -n +2 | sort | uniq -c >&2
rm -rf "$dir"
