#!/usr/bin/env bash
# Captures Apache Kafka's inter-broker traffic in ZooKeeper mode: a 3-broker cluster
# (scripts/cluster) whose brokers advertise a recording proxy (capture.py) in front of each
# of them, so every controller -> broker request (LeaderAndIsr, UpdateMetadata,
# StopReplica), broker -> controller request (ControlledShutdown, AlterPartition,
# AllocateProducerIds), follower Fetch and admin request to the controller passes one.
#
#   COMPAT_CACHE=/work/compat-cache protocol-tests/capture-cluster.sh [--ibp V] [--scenario S]
#
# --ibp sets inter.broker.protocol.version (default 3.9): Kafka 3.9.1 then speaks the
# inter-broker versions that release spoke (LeaderAndIsr v0 at 0.8.2 ... v7 at 3.4+), which
# is what skua meets in a cluster being upgraded. KAFKA_CLUSTER_VERSION=3.4.1 (or another
# release) runs that release's brokers instead, at its own protocol version by default:
# their AlterPartition is the newest their release knew (v0 before 3.2, v2 in 3.3 and 3.4).
# --scenario:
#   full   (default) create a topic (LeaderAndIsr, UpdateMetadata), an idempotent producer
#          (AllocateProducerIds; follower Fetches carry its records), SIGSTOP a follower past
#          replica.lag.time.max.ms and SIGCONT it (AlterPartition shrinking and expanding the
#          ISR), SIGKILL it until its ZooKeeper session expires (leader changes), restart it,
#          delete the topic (StopReplica with deletion), and SIGTERM a broker
#          (ControlledShutdown, StopReplica without deletion). About three minutes.
#   short  the same without the pause and the kill: LeaderAndIsr, UpdateMetadata,
#          StopReplica with and without deletion, ControlledShutdown. About a minute.
#   isr    short plus the pause (AlterPartition).
#   follower  full, keeping only what followers send their leaders (Fetch, ListOffsets,
#          OffsetForLeaderEpoch): at an --ibp below 2.7 Kafka's followers truncate with
#          OffsetForLeaderEpoch before they fetch, on becoming followers and after each
#          leader change. The label gains -follower.
#   admin  Kafka 3.9.1's kafka-leader-election.sh (preferred and unclean: ElectLeaders v2)
#          and kafka-reassign-partitions.sh (--execute, --list, --verify, --cancel:
#          AlterPartitionReassignments and ListPartitionReassignments v0), then IBM/sarama
#          (capture-sarama) set to Kafka 0.10.2 and 2.3, which send ElectLeaders v0 and v1.
#
# Writes protocol-tests/fixtures-cluster/<label>-to-broker-<i>/<Api>-v<v>-<n>{,.resp}.bin
# (what broker i received, and its answer) and their lines in fixtures-cluster/MANIFEST.tsv,
# replacing that label's previous capture only. The label is kafka-<release>, with -ibp-V
# for another --ibp and -admin for the admin scenario.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO_ROOT=$(cd "$HERE/.." && pwd)
source "$REPO_ROOT/compat/lib/common.sh"
log() { printf '[capture-cluster] %s\n' "$*" >&2; }

# The brokers' release (scripts/cluster reads it too); the tools are always 3.9.1's.
KAFKA_CLUSTER_VERSION=${KAFKA_CLUSTER_VERSION:-3.9.1}
export KAFKA_CLUSTER_VERSION
RELEASE_IBP=$(cut -d. -f1,2 <<<"$KAFKA_CLUSTER_VERSION")
IBP=$RELEASE_IBP
SCENARIO=full
while (($#)); do
  case $1 in
    --ibp) IBP=$2; shift 2 ;;
    --scenario) SCENARIO=$2; shift 2 ;;
    *) echo "usage: $0 [--ibp V] [--scenario full|follower|short|isr|admin]" >&2; exit 2 ;;
  esac
done
OUT="$HERE/fixtures-cluster"
LABEL=kafka-$KAFKA_CLUSTER_VERSION
[[ $IBP == "$RELEASE_IBP" ]] || LABEL+="-ibp-$IBP"
overrides=(--override "inter.broker.protocol.version=$IBP")
producer_props=(--producer-property enable.idempotence=true --producer-property acks=all)
case $IBP in
  0.8.* | 0.9.* | 0.10.*)
    # Record format v2 (the default) needs 0.11: the brokers write the format of their
    # protocol version, which has no producer ids.
    overrides+=(--override "log.message.format.version=$IBP")
    producer_props=(--producer-property enable.idempotence=false --producer-property acks=all) ;;
esac
case $SCENARIO in
  # Fetch, LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown, AlterPartition,
  # AllocateProducerIds. Fetch only at 3.9, where followers send a version skua routes.
  full) APIS=1,4,5,6,7,56,67 ;;
  short | isr) APIS=4,5,6,7,56,67 ;;
  # Fetch, ListOffsets, OffsetForLeaderEpoch.
  follower) APIS=1,2,23; LABEL+=-follower ;;
  # ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments.
  admin) APIS=43,45,46; LABEL+=-admin ;;
  *) echo "unknown scenario $SCENARIO" >&2; exit 2 ;;
esac
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

# Forget this label's earlier capture (the other labels stay).
mkdir -p "$OUT"
rm -rf "$OUT/$LABEL"-to-broker-*
[[ ! -f $OUT/MANIFEST.tsv ]] || awk -F'\t' -v p="$LABEL-to-broker-" \
  'NR == 1 || index($2, p) != 1' "$OUT/MANIFEST.tsv" >"$dir/manifest" \
  && cp "$dir/manifest" "$OUT/MANIFEST.tsv"
listen=() advertised=()
for i in 1 2 3; do
  listen+=("$(free_port)")
  advertised+=("$(free_port)")
  python3 "$HERE/capture.py" --listen "127.0.0.1:${advertised[-1]}" \
    --upstream "127.0.0.1:${listen[-1]}" --client "$LABEL-to-broker-$i" \
    --client-version "$KAFKA_CLUSTER_VERSION" --out "$OUT" --apis "$APIS" --max-per-version 12 \
    2>>"$dir/proxy-$i.log" &
  proxies+=($!)
done

bootstrap=$("$REPO_ROOT/scripts/cluster" start 3 --dir "$dir" \
  --ports "$(IFS=,; echo "${listen[*]}")" --advertised-ports "$(IFS=,; echo "${advertised[*]}")" \
  --override replica.lag.time.max.ms=3000 --override replica.fetch.wait.max.ms=2500 \
  --override zookeeper.session.timeout.ms=18000 \
  --override controlled.shutdown.enable=true "${overrides[@]}")
log "cluster up: $bootstrap"

produce() { # FIRST LAST [producer properties...]
  local first=$1 last=$2; shift 2
  seq "$first" "$last" | sed 's/.*/&:&/' | kafka kafka.tools.ConsoleProducer \
    --bootstrap-server "$bootstrap" --topic "$TOPIC" --property parse.key=true \
    --property key.separator=: "$@" 2>/dev/null
}

if [[ $SCENARIO == admin ]]; then
  # Partition i's preferred leader is broker i+1; broker 1 shut down and back makes
  # partition 0's leader broker 2, so the preferred election has something to move.
  kafka org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" --create \
    --topic "$TOPIC" --replica-assignment 1:2,2:3,3:1 2>/dev/null
  sleep 3
  produce 1 20 "${producer_props[@]}"
  "$REPO_ROOT/scripts/cluster" term "$dir" 1
  "$REPO_ROOT/scripts/cluster" restart "$dir" 1
  sleep 8
  log "kafka-leader-election.sh: preferred (all partitions), unclean (one)"
  kafka org.apache.kafka.tools.LeaderElectionCommand --bootstrap-server "$bootstrap" \
    --election-type preferred --all-topic-partitions || true
  kafka org.apache.kafka.tools.LeaderElectionCommand --bootstrap-server "$bootstrap" \
    --election-type unclean --topic "$TOPIC" --partition 1 || true
  log "kafka-reassign-partitions.sh: execute (throttled), list, verify, cancel"
  printf '{"version":1,"partitions":[{"topic":"%s","partition":0,"replicas":[2,3]},{"topic":"%s","partition":1,"replicas":[3,1]}]}\n' \
    "$TOPIC" "$TOPIC" >"$dir/reassign.json"
  kafka org.apache.kafka.tools.reassign.ReassignPartitionsCommand --bootstrap-server "$bootstrap" \
    --reassignment-json-file "$dir/reassign.json" --execute --throttle 1 || true
  kafka org.apache.kafka.tools.reassign.ReassignPartitionsCommand --bootstrap-server "$bootstrap" --list || true
  kafka org.apache.kafka.tools.reassign.ReassignPartitionsCommand --bootstrap-server "$bootstrap" \
    --reassignment-json-file "$dir/reassign.json" --cancel || true
  sleep 2
  printf '{"version":1,"partitions":[{"topic":"%s","partition":2,"replicas":[1,2]}]}\n' \
    "$TOPIC" >"$dir/reassign.json"
  kafka org.apache.kafka.tools.reassign.ReassignPartitionsCommand --bootstrap-server "$bootstrap" \
    --reassignment-json-file "$dir/reassign.json" --execute || true
  sleep 3
  kafka org.apache.kafka.tools.reassign.ReassignPartitionsCommand --bootstrap-server "$bootstrap" \
    --reassignment-json-file "$dir/reassign.json" --verify || true
  log "IBM/sarama set to Kafka 0.10.2 and 2.3: ElectLeaders v0 and v1"
  (cd "$HERE/capture-sarama" && go run . -bootstrap "${bootstrap%%,*}" -topic "$TOPIC")
  sleep 1
else
  kafka org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" --create \
    --topic "$TOPIC" --partitions 3 --replication-factor 3 2>/dev/null
  sleep 3
  produce 1 20 "${producer_props[@]}"
  sleep 3
fi

if [[ $SCENARIO == full || $SCENARIO == follower || $SCENARIO == isr ]]; then
  log "SIGSTOP broker 3 (ISR shrink), then SIGCONT (ISR expand)"
  # Stopped for less than the ZooKeeper session timeout (18 s) but longer than
  # replica.lag.time.max.ms (3 s): the leaders on brokers 1 and 2, which get records
  # meanwhile, drop broker 3 from their ISR themselves (AlterPartition), and take it back
  # once it has caught up. Records for partitions broker 3 leads wait for it.
  kill -STOP "$(cat "$dir/broker-3/pid")"
  produce 21 60 --producer-property enable.idempotence=false --producer-property acks=1 &
  producer=$!
  sleep 9
  kill -CONT "$(cat "$dir/broker-3/pid")"
  wait "$producer" || true
  sleep 8
fi

if [[ $SCENARIO == full || $SCENARIO == follower ]]; then
  log "SIGKILL broker 3 (session expiry, new leaders), then restart it"
  "$REPO_ROOT/scripts/cluster" kill "$dir" 3
  sleep 24
  "$REPO_ROOT/scripts/cluster" restart "$dir" 3
  sleep 12
fi

if [[ $SCENARIO != admin ]]; then
  log "delete the topic (StopReplica with deletion)"
  kafka org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" --delete --topic "$TOPIC" 2>/dev/null
  sleep 5

  log "second topic, then SIGTERM broker 2 (ControlledShutdown)"
  kafka org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" --create \
    --topic "$TOPIC-2" --partitions 3 --replication-factor 3 2>/dev/null
  sleep 5
  "$REPO_ROOT/scripts/cluster" term "$dir" 2
  sleep 3
fi
"$REPO_ROOT/scripts/cluster" stop "$dir"
sleep 1
log "captured for $LABEL: $(grep -c -F "$LABEL-to-broker-" "$OUT/MANIFEST.tsv") frames"
grep -F "$LABEL-to-broker-" "$OUT/MANIFEST.tsv" | cut -f5,6 | sort | uniq -c >&2
rm -rf "$dir"
