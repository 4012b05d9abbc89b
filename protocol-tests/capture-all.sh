#!/usr/bin/env bash
# Recaptures every client's fixtures against a scratch skua. See README.md.
#
#   protocol-tests/capture-all.sh [client...]
#
# Clients: librdkafka kcat java java-share franz-go kafka-python, kafka-acls (Kafka's kafka-acls.sh) and
# librdkafka-acls (confluent-kafka's ACL admin calls), and franz-go-kafka-X.Y: franz-go
# pinned to the request versions Apache Kafka X.Y spoke, for the older versions skua
# advertises that no current client sends by default.
#
# Needs target/release/skua, python3, and whichever clients are named:
#   PYTHON     a python with confluent-kafka and kafka-python (default: protocol-tests/.cache/venv)
#   KAFKA_LIBS the libs/ directory of a Kafka 4.1 distribution (clients + tools jars)
#   SKUA       the broker binary (default: target/release/skua)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
PYTHON=${PYTHON:-$here/.cache/venv/bin/python}
KAFKA_LIBS=${KAFKA_LIBS:-$here/.cache/kafka/libs}
BROKER_PORT=${BROKER_PORT:-39192}
PROXY_PORT=${PROXY_PORT:-39092}
clients=("$@")
PINS=(0.8.2 0.9.0 0.10.0 0.10.1 0.10.2 0.11.0 1.0 1.1 2.0 2.1 2.2 2.3 2.4 2.5 2.6 2.7 2.8
  3.0 3.1 3.2 3.3 3.4 3.5 3.6 3.7 3.8 3.9 4.0)
if [ ${#clients[@]} -eq 0 ]; then
  clients=(librdkafka kcat java java-share franz-go kafka-python)
  for v in "${PINS[@]}"; do clients+=("franz-go-kafka-$v"); done
fi

logs=$(mktemp -d)
"${SKUA:-$root/target/release/skua}" \
  --override "listeners=PLAINTEXT://127.0.0.1:$BROKER_PORT" \
  --override "advertised.listeners=PLAINTEXT://127.0.0.1:$PROXY_PORT" \
  --override "log.dirs=$logs/data" \
  --override group.initial.rebalance.delay.ms=0 >"$logs/skua.log" 2>&1 &
skua=$!
proxy=""
cleanup() {
  [ -n "$proxy" ] && kill "$proxy" 2>/dev/null || true
  kill "$skua" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$logs"
}
trap cleanup EXIT
sleep 1

start_proxy() { # client version [max-per-version]
  python3 "$here/capture.py" --listen "127.0.0.1:$PROXY_PORT" --upstream "127.0.0.1:$BROKER_PORT" \
    --client "$1" --client-version "$2" --max-per-version "${3:-3}" --reset &
  proxy=$!
  sleep 0.5
}
stop_proxy() { kill "$proxy"; wait "$proxy" 2>/dev/null || true; proxy=""; }
B=127.0.0.1:$PROXY_PORT
franz_version() { sed -n 's/.*twmb\/franz-go \(v[^ ]*\)$/\1/p' "$here/capture-go/go.mod" | head -1; }

for c in "${clients[@]}"; do
  case $c in
  librdkafka)
    start_proxy librdkafka "$("$PYTHON" -c 'import confluent_kafka as c; print(c.libversion()[0])')"
    "$PYTHON" "$here/clients/librdkafka_capture.py" "$B" ;;
  kcat)
    start_proxy kcat "$(kcat -V | sed -n 's/^Version \([^ ]*\).*librdkafka \([^ ]*\).*/\1 (librdkafka \2)/p')"
    kcat -b "$B" -L -t kcat-a >/dev/null || true # auto-creates kcat-a
    sleep 0.5
    seq 1 20 | kcat -b "$B" -P -t kcat-a -p 0 -z snappy
    seq 1 20 | kcat -b "$B" -P -t kcat-a -p 0 -z zstd -X enable.idempotence=true
    kcat -b "$B" -C -t kcat-a -p 0 -o beginning -e -q | wc -l
    kcat -b "$B" -Q -t kcat-a:0:1700000000000 || true ;;
  java)
    start_proxy java 4.1.2
    javac -d "$logs/java" -cp "$KAFKA_LIBS/*" "$here/clients/java/Capture.java"
    java -cp "$KAFKA_LIBS/*:$logs/java" Capture "$B"
    java -cp "$KAFKA_LIBS/*" org.apache.kafka.tools.TopicCommand --bootstrap-server "$B" --describe --topic java-a
    java -cp "$KAFKA_LIBS/*:$logs/java" Capture "$B" delete ;;
  java-share)
    # Share groups need kafka-clients 4.2+ (KAFKA_LIBS_SHARE: a Kafka 4.4 libs/ dir).
    start_proxy java-share 4.4.0
    java -cp "${KAFKA_LIBS_SHARE:?a Kafka 4.4 libs dir}/*" "$here/clients/java/CaptureShare.java" "$B" ;;
  franz-go)
    start_proxy franz-go "$(franz_version)"
    (cd "$here/capture-go" && go run . "$B") ;;
  franz-go-kafka-*)
    v=${c#franz-go-kafka-}
    start_proxy "$c" "$(franz_version) with Kafka $v max versions" 2
    (cd "$here/capture-go" && go run . "$B" "$v") ;;
  kafka-acls)
    # CreateAcls, DescribeAcls, DeleteAcls at the tool's versions; the scratch broker has no
    # authorizer, so each answers SECURITY_DISABLED (and the tool fails), as Kafka's would.
    start_proxy kafka-acls 4.1.2
    acl() { java -cp "$KAFKA_LIBS/*" org.apache.kafka.tools.AclCommand --bootstrap-server "$B" "$@" || true; }
    acl --add --allow-principal User:capture --operation Read --topic acls-a
    acl --list --topic acls-a
    acl --remove --force --topic acls-a ;;
  librdkafka-acls)
    start_proxy librdkafka-acls "$("$PYTHON" -c 'import confluent_kafka as c; print(c.libversion()[0])')"
    "$PYTHON" "$here/clients/librdkafka_acls_capture.py" "$B" ;;
  kafka-python)
    start_proxy kafka-python "$("$PYTHON" -c 'import kafka; print(kafka.__version__)')"
    "$PYTHON" "$here/clients/kafka_python_capture.py" "$B" ;;
  *) echo "unknown client $c" >&2; exit 2 ;;
  esac
  stop_proxy
done
