#!/usr/bin/env bash
# Run one Apache Kafka KRaft controller (process.roles=controller, a quorum of one) on
# loopback, using jars fetched from Maven Central: the controller skua registers with as
# a KRaft broker (process.roles=broker).
#
#   compat/kafka-controller.sh --port PORT --dir DIR [--version 4.4.0] [--node-id 3000]
#                              [--host ADDR] [--feature NAME=LEVEL]... [--set KEY=VALUE]...
#                              [--voters VOTERS --cluster-id ID]
#   compat/kafka-controller.sh --stop DIR
#   compat/kafka-controller.sh --format-broker PROPS --cluster-id ID [--feature NAME=LEVEL]...
#   compat/kafka-controller.sh --broker-of VOTERS --cluster-id ID --port PORT --dir DIR
#                              [--node-id N] [--feature NAME=LEVEL]... [--set KEY=VALUE]...
#   compat/kafka-controller.sh --port PORT --dir DIR --bootstrap-servers SERVERS
#                              (--standalone | --join --cluster-id ID) [...]
#   compat/kafka-controller.sh --tool [--version V] CLASS ARGS...
#
# Starts the controller in the background once its dir is formatted (kafka-storage.sh
# format, with each --feature finalized at that level; each --set is a line added to its
# properties), waits until its port accepts connections and prints the cluster id on
# stdout. --voters makes it one voter of a static quorum (controller.quorum.voters, e.g.
# 3000@127.0.0.1:P1,3001@127.0.0.1:P2,3002@127.0.0.1:P3; --node-id and --port name this
# one), its dir formatted for cluster ID like its peers'. --host makes it listen on ADDR
# instead of 127.0.0.1 (scripts/cluster --netns: its network namespace's address). The pid is in DIR/kafka.pid, the log
# in DIR/server.log, the controller's own properties in DIR/controller.properties.
# --format-broker formats a broker's dirs (its properties file PROPS) for cluster ID as
# kafka-storage.sh format does, and exits. --broker-of starts an Apache Kafka broker
# (process.roles=broker, listener PLAINTEXT on PORT) of the cluster whose controllers
# are VOTERS (controller.quorum.voters, e.g. 3000@127.0.0.1:19093), its dir formatted for
# cluster ID, its properties in DIR/broker.properties.
# --bootstrap-servers makes the controller one of a dynamic quorum (KIP-853, Kafka 4's
# default: controller.quorum.bootstrap.servers, e.g. 127.0.0.1:P1,127.0.0.1:P2, in place
# of static voters): --standalone formats it as the quorum's only voter (kafka-storage.sh
# format --standalone, kraft.version 1), --join as an observer to be added as a voter
# later (--no-initial-controllers, its cluster ID given). --tool runs a Kafka tool class
# (e.g. org.apache.kafka.tools.MetadataQuorumCommand) with that version's jars.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

port="" host=127.0.0.1 dir="" stop="" node_id=3000 features=() settings=() format_broker="" cluster_id="" broker_of="" voters=""
bootstrap_servers="" dynamic="" tool=0
KAFKA_VERSION=4.4.0
while (($#)); do
  case $1 in
    --port) port=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --host) host=$2; shift 2 ;;
    --version) KAFKA_VERSION=$2; shift 2 ;;
    --node-id) node_id=$2; shift 2 ;;
    --feature) features+=(--feature "$2"); shift 2 ;;
    --set) settings+=("$2"); shift 2 ;;
    --stop) stop=$2; shift 2 ;;
    --format-broker) format_broker=$2; shift 2 ;;
    --cluster-id) cluster_id=$2; shift 2 ;;
    --broker-of) broker_of=$2; shift 2 ;;
    --voters) voters=$2; shift 2 ;;
    --bootstrap-servers) bootstrap_servers=$2; shift 2 ;;
    --standalone) dynamic=standalone; shift ;;
    --join) dynamic=join; shift ;;
    --tool) tool=1; shift; break ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    *) die "unknown argument: $1" ;;
  esac
done

if ((tool)); then
  while [[ ${1:-} == --version ]]; do KAFKA_VERSION=$2; shift 2; done
  (($#)) || die "--tool needs a class"
  libs=$(kafka_libs "$KAFKA_VERSION")
  exec java -Xmx256m -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$(dirname "${BASH_SOURCE[0]}")/kafka/log4j2.properties" \
    -cp "$libs/*" "$@"
fi

if [[ -n $stop ]]; then
  [[ -f $stop/kafka.pid ]] || die "no $stop/kafka.pid"
  pid=$(cat "$stop/kafka.pid")
  kill "$pid" 2>/dev/null || exit 0
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || exit 0; sleep 0.2; done
  kill -9 "$pid" 2>/dev/null || true
  exit 0
fi

if [[ -n $format_broker ]]; then
  [[ -n $cluster_id ]] || die "--format-broker needs --cluster-id"
  command -v java >/dev/null || die "java not found (Java 17+ required)"
  libs=$(kafka_libs "$KAFKA_VERSION")
  # The tool's log goes beside PROPS (not into a "${sys:kafka.logs.dir}" dir in the cwd).
  java -Xmx256m -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
    -Dkafka.logs.dir="$(dirname "$format_broker")" \
    -Dlog4j2.configurationFile="$(dirname "${BASH_SOURCE[0]}")/kafka/log4j2.properties" \
    -cp "$libs/*" kafka.tools.StorageTool format -t "$cluster_id" "${features[@]}" \
    -c "$format_broker" >&2 || die "kafka storage format of $format_broker failed"
  exit 0
fi

[[ -n $port && -n $dir ]] || die "--port and --dir are required"
[[ -z $voters || -n $cluster_id ]] || die "--voters needs --cluster-id (every voter formatted for the same cluster)"
[[ -z $bootstrap_servers || -n $dynamic ]] || die "--bootstrap-servers needs --standalone or --join"
[[ -z $dynamic || -n $bootstrap_servers ]] || die "--standalone and --join need --bootstrap-servers"
[[ $dynamic != join || -n $cluster_id ]] || die "--join needs --cluster-id"
[[ -z $dynamic || -z $voters ]] || die "--voters is a static quorum; --bootstrap-servers a dynamic one"
command -v java >/dev/null || die "java not found (Java 17+ required)"
libs=$(kafka_libs "$KAFKA_VERSION")
mkdir -p "$dir/data"

role=controller
if [[ -n $broker_of ]]; then
  [[ -n $cluster_id ]] || die "--broker-of needs --cluster-id"
  role=broker
  cat >"$dir/broker.properties" <<PROPS
process.roles=broker
node.id=$node_id
controller.quorum.voters=$broker_of
listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/data
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
PROPS
else
if [[ -n $dynamic ]]; then
  quorum="controller.quorum.bootstrap.servers=$bootstrap_servers"
else
  quorum="controller.quorum.voters=${voters:-$node_id@$host:$port}"
fi
cat >"$dir/controller.properties" <<PROPS
process.roles=controller
node.id=$node_id
$quorum
listeners=CONTROLLER://$host:$port
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/data
num.partitions=1
default.replication.factor=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
PROPS
fi
for s in "${settings[@]}"; do printf '%s\n' "$s" >>"$dir/$role.properties"; done

jvm=(java -Xms256m -Xmx512m -XX:+UseG1GC -XX:TieredStopAtLevel=1
     -Djava.awt.headless=true -Dkafka.logs.dir="$dir"
     -Dlog4j2.configurationFile="$(dirname "${BASH_SOURCE[0]}")/kafka/log4j2.properties"
     -cp "$libs/*")

if [[ ! -f $dir/data/meta.properties ]]; then
  [[ -n $cluster_id ]] || cluster_id=$("${jvm[@]}" kafka.tools.StorageTool random-uuid)
  initial=()
  case $dynamic in
    standalone) initial=(--standalone) ;;
    join) initial=(--no-initial-controllers) ;;
  esac
  "${jvm[@]}" kafka.tools.StorageTool format -t "$cluster_id" "${features[@]}" "${initial[@]}" \
    -c "$dir/$role.properties" >"$dir/format.log" 2>&1 \
    || { cat "$dir/format.log" >&2; die "kafka storage format failed"; }
fi
cluster_id=$(sed -n 's/^cluster.id=//p' "$dir/data/meta.properties")

"${jvm[@]}" kafka.Kafka "$dir/$role.properties" >"$dir/kafka.log" 2>&1 &
pid=$!
echo "$pid" >"$dir/kafka.pid"
if ! wait_port "$host" "$port" 90 "$pid"; then
  tail -n 30 "$dir/kafka.log" "$dir/server.log" >&2 2>/dev/null || true
  kill "$pid" 2>/dev/null || true
  die "the Kafka $role did not start listening on $host:$port"
fi
log "Apache Kafka $KAFKA_VERSION $role $node_id on $host:$port (pid $pid, dir $dir)"
echo "$cluster_id"
