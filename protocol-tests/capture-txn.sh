#!/usr/bin/env bash
# Captures the transactional clients' fixtures against a scratch skua of their own. See
# README.md: their frames carry the producer ids this broker hands out, in order, so they
# are replayed the same way (one broker, these clients one after another).
#
#   protocol-tests/capture-txn.sh
#
# Needs the skua binary (SKUA, default target/release/skua), go, java and
#   PYTHON     a python with confluent-kafka (default: protocol-tests/.cache/venv)
#   KAFKA_LIBS the libs/ directory of a Kafka 4.1 distribution
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
PYTHON=${PYTHON:-$here/.cache/venv/bin/python}
KAFKA_LIBS=${KAFKA_LIBS:-$here/.cache/kafka/libs}
BROKER_PORT=${BROKER_PORT:-39193}
PROXY_PORT=${PROXY_PORT:-39093}
# 2.4: the last release whose TxnOffsetCommit is v2.
PINS=(0.11.0 2.0 2.7 3.0 3.8 2.4)

logs=$(mktemp -d)
"${SKUA:-$root/target/release/skua}" \
  --override "listeners=PLAINTEXT://127.0.0.1:$BROKER_PORT" \
  --override "advertised.listeners=PLAINTEXT://127.0.0.1:$PROXY_PORT" \
  --override "log.dirs=$logs/data" \
  --override transaction.state.log.num.partitions=3 \
  --override offsets.topic.num.partitions=3 >"$logs/skua.log" 2>&1 &
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
# __consumer_offsets exists before the clients start, as the replay makes it (a
# FindCoordinator v1 straight to the broker, not recorded): clients racing its creation
# would otherwise be answered COORDINATOR_NOT_AVAILABLE or not, by timing.
python3 - "$BROKER_PORT" <<'PY'
import socket, struct, sys
body = struct.pack(">hhih", 10, 1, 1, 5) + b"setup" + struct.pack(">h", 12) + b"replay-setup" + b"\x00"
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(struct.pack(">i", len(body)) + body)
size = struct.unpack(">i", s.recv(4))[0]
resp = b""
while len(resp) < size:
    resp += s.recv(size - len(resp))
assert struct.unpack(">h", resp[8:10])[0] == 0, resp
PY

start_proxy() { # client version
  python3 "$here/capture.py" --listen "127.0.0.1:$PROXY_PORT" --upstream "127.0.0.1:$BROKER_PORT" \
    --client "$1" --client-version "$2" --max-per-version 20 --reset &
  proxy=$!
  sleep 0.5
}
stop_proxy() { kill "$proxy"; wait "$proxy" 2>/dev/null || true; proxy=""; }
B=127.0.0.1:$PROXY_PORT
franz_version() { sed -n 's/.*twmb\/franz-go \(v[^ ]*\)$/\1/p' "$here/capture-go/go.mod" | head -1; }

start_proxy txn-java 4.1.2
javac -d "$logs/java" -cp "$KAFKA_LIBS/*" "$here/clients/java/CaptureTxn.java"
java -cp "$KAFKA_LIBS/*:$logs/java" CaptureTxn "$B"
stop_proxy
start_proxy txn-librdkafka "$("$PYTHON" -c 'import confluent_kafka as c; print(c.libversion()[0])')"
"$PYTHON" "$here/clients/librdkafka_txn_capture.py" "$B"
stop_proxy
start_proxy txn-franz-go "$(franz_version)"
(cd "$here/capture-go" && go run . "$B" txn)
stop_proxy
for v in "${PINS[@]}"; do
  start_proxy "txn-franz-go-kafka-$v" "$(franz_version) with Kafka $v max versions"
  (cd "$here/capture-go" && go run . "$B" "$v" txn)
  stop_proxy
done
