#!/usr/bin/env bash
# Run Apache Kafka (single node, KRaft, combined broker+controller) on loopback,
# using jars fetched from Maven Central. This is the reference broker that skua's
# compatibility suite is validated against, and a baseline for benchmarks.
#
#   compat/kafka-broker.sh [--port PORT] [--dir DIR] [--version 4.1.2] [--daemon]
#   compat/kafka-broker.sh --stop DIR
#
# Foreground by default. With --daemon it starts the broker in the background,
# waits until the port accepts connections, and prints `127.0.0.1:PORT` on stdout;
# the pid is in DIR/kafka.pid and the broker log in DIR/kafka.log.
# A fresh temp DIR is used when --dir is not given (formatted on first start).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

port="" dir="" daemon=0 stop=""
while (($#)); do
  case $1 in
    --port) port=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --version) KAFKA_VERSION=$2; shift 2 ;;
    --daemon) daemon=1; shift ;;
    --stop) stop=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) die "unknown argument: $1" ;;
  esac
done

if [[ -n $stop ]]; then
  [[ -f $stop/kafka.pid ]] || die "no $stop/kafka.pid"
  pid=$(cat "$stop/kafka.pid")
  kill "$pid" 2>/dev/null || exit 0
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || exit 0; sleep 0.2; done
  kill -9 "$pid" 2>/dev/null || true
  exit 0
fi

command -v java >/dev/null || die "java not found (Java 17+ required)"
libs=$(kafka_libs "$KAFKA_VERSION")
[[ -n $port ]] || port=$(free_port)
cport=$(free_port)
[[ -n $dir ]] || dir=$(mktemp -d "${TMPDIR:-/tmp}/kafka-ref.XXXXXX")
mkdir -p "$dir/data"

cat >"$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/data
num.partitions=1
default.replication.factor=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=3
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
delete.topic.enable=true
# ACLs are enforced-capable (so the ACL admin cases can run), but every client connects
# as User:ANONYMOUS over PLAINTEXT, which is a super user here: nothing is denied.
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS
allow.everyone.if.no.acl.found=true
# As skua runs in scripts/compat: client quota rates settle within seconds, and no
# retention check deletes the suites' records with fixed 2023 timestamps mid-case.
quota.window.num=2
log.retention.check.interval.ms=86400000
# The share suite's kill -9 case gives its group a 10 s session timeout.
group.share.min.session.timeout.ms=10000
PROPS

jvm=(java -Xms512m -Xmx1g -XX:+UseG1GC -XX:MaxGCPauseMillis=20
     -Djava.awt.headless=true -Dkafka.logs.dir="$dir"
     -Dlog4j2.configurationFile="$(dirname "${BASH_SOURCE[0]}")/kafka/log4j2.properties"
     -cp "$libs/*")

if [[ ! -f $dir/data/meta.properties ]]; then
  cluster_id=$("${jvm[@]}" kafka.tools.StorageTool random-uuid)
  "${jvm[@]}" kafka.tools.StorageTool format -t "$cluster_id" \
    -c "$dir/server.properties" >"$dir/format.log" 2>&1 \
    || { cat "$dir/format.log" >&2; die "kafka storage format failed"; }
fi

if ((daemon)); then
  "${jvm[@]}" kafka.Kafka "$dir/server.properties" >"$dir/kafka.log" 2>&1 &
  pid=$!
  echo "$pid" >"$dir/kafka.pid"
  if ! wait_port 127.0.0.1 "$port" 90 "$pid"; then
    tail -n 30 "$dir/kafka.log" "$dir/server.log" >&2 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
    die "Kafka did not start listening on 127.0.0.1:$port"
  fi
  log "Apache Kafka $KAFKA_VERSION listening on 127.0.0.1:$port (pid $pid, dir $dir)"
  echo "127.0.0.1:$port"
else
  log "Apache Kafka $KAFKA_VERSION on 127.0.0.1:$port (dir $dir)"
  echo $$ >"$dir/kafka.pid"
  exec "${jvm[@]}" kafka.Kafka "$dir/server.properties"
fi
