#!/usr/bin/env bash
# skua compatibility suite: Kafka Connect (the connect-runtime and connect-file jars from
# Maven Central) run unchanged against the broker, with the FileStream source and sink
# connectors: a distributed worker (its compacted config, offset and status topics, the
# connect group protocol, the REST API) and a standalone one.
#   compat/apps/connect.sh HOST:PORT
# Prints one PASS/FAIL line per case.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../lib/common.sh"
source "$here/../lib/cases.sh"
B=${1:?usage: connect.sh HOST:PORT}
BIN="$here/../bin"
export COMPAT_TOOL_TIMEOUT=${COMPAT_TOOL_TIMEOUT:-45}
LIBS=$(apps_libs)
N=$(uniq_name connect)
W="$CASE_TMP/worker"
mkdir -p "$W"
worker_pid=""
stop_worker() {
  [[ -n $worker_pid ]] || return 0
  kill "$worker_pid" 2>/dev/null
  for _ in $(seq 1 100); do kill -0 "$worker_pid" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$worker_pid" 2>/dev/null
  wait "$worker_pid" 2>/dev/null
  worker_pid=""
}
trap 'stop_worker; rm -rf "$CASE_TMP"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
REST="http://127.0.0.1:$PORT"

# start_worker CLASS ARGS...: a Connect worker in the background, its log in $W/CLASS.log
start_worker() {
  local cls=$1; shift
  java -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dlog4j2.configurationFile="$(tools_log4j)" -cp "$LIBS/*" "$cls" "$@" \
    >>"$W/${cls##*.}.log" 2>&1 &
  worker_pid=$!
}
rest_up() { curl -fsS "$REST/connectors" >/dev/null 2>&1; }
# lines_in FILE N: FILE holds at least N lines
lines_in() { [[ -f $1 ]] && (($(wc -l <"$1") >= $2)); }
worker_failed() { fail "$1: $(grep -E 'ERROR|Exception' "$W"/*.log | grep -v '^\s*at ' | tail -n 3 | tr '\n' ' ' | head -c 300)"; }

distributed_props() {
  cat >"$W/distributed.properties" <<P
bootstrap.servers=$B
group.id=$N-cluster
key.converter=org.apache.kafka.connect.storage.StringConverter
value.converter=org.apache.kafka.connect.storage.StringConverter
config.storage.topic=$N-configs
offset.storage.topic=$N-offsets
status.storage.topic=$N-status
config.storage.replication.factor=1
offset.storage.replication.factor=1
status.storage.replication.factor=1
offset.flush.interval.ms=1000
listeners=http://127.0.0.1:$PORT
P
}
connector() { # connector NAME CLASS KEY=VALUE...: creates it through the REST API
  local name=$1 cls=$2; shift 2
  local cfg="\"connector.class\":\"$cls\",\"tasks.max\":\"1\"" kv
  for kv in "$@"; do cfg+=",\"${kv%%=*}\":\"${kv#*=}\""; done
  curl -fsS -X POST -H 'Content-Type: application/json' \
    --data "{\"name\":\"$name\",\"config\":{$cfg}}" "$REST/connectors" >"$W/$name.created" 2>&1
}

# Distributed worker: source file -> topic -> sink file through the REST API.
c_distributed() {
  distributed_props
  start_worker org.apache.kafka.connect.cli.ConnectDistributed "$W/distributed.properties"
  retry_until 90 rest_up || { worker_failed "REST API not up"; return 1; }
  printf 'line-%s\n' 1 2 3 4 5 >"$W/in.txt"
  connector "$N-source" org.apache.kafka.connect.file.FileStreamSourceConnector \
    "file=$W/in.txt" "topic=$N-data" || { fail "create source: $(cat "$W/$N-source.created")"; return 1; }
  connector "$N-sink" org.apache.kafka.connect.file.FileStreamSinkConnector \
    "file=$W/out.txt" "topics=$N-data" || { fail "create sink: $(cat "$W/$N-sink.created")"; return 1; }
  retry_until 90 lines_in "$W/out.txt" 5 || { worker_failed "sink wrote $(cat "$W/out.txt" 2>/dev/null | wc -l) of 5 lines"; return 1; }
  diff <(printf 'line-%s\n' 1 2 3 4 5) "$W/out.txt" >"$W/diff" || { fail "sink file differs: $(head -c 200 "$W/diff")"; return 1; }
  curl -fsS "$REST/connectors/$N-sink/status" >"$W/status" || return 1
  grep -q '"state":"RUNNING"' "$W/status" || fail "sink status: $(head -c 300 "$W/status")"
}
# The worker's internal topics, created by Connect itself, are compacted as it requires.
c_internal_topics() {
  local t
  for t in configs offsets status; do
    "$BIN/kafka-configs.sh" --bootstrap-server "$B" --entity-type topics --entity-name "$N-$t" \
      --describe >"$W/$t.cfg" || return 1
    grep -q "cleanup.policy=compact" "$W/$t.cfg" || { fail "$N-$t not compacted: $(head -c 200 "$W/$t.cfg")"; return 1; }
  done
}
# A restarted worker resumes from the source offsets in its compacted offsets topic:
# new lines arrive, none is read twice.
c_restart() {
  stop_worker
  printf 'line-%s\n' 6 7 >>"$W/in.txt"
  start_worker org.apache.kafka.connect.cli.ConnectDistributed "$W/distributed.properties"
  retry_until 90 rest_up || { worker_failed "REST API not up after restart"; return 1; }
  retry_until 90 lines_in "$W/out.txt" 7 || { worker_failed "sink has $(wc -l <"$W/out.txt") of 7 lines"; return 1; }
  "$BIN/kafka-get-offsets.sh" --bootstrap-server "$B" --topic "$N-data" --time latest >"$W/latest" || return 1
  grep -qx "$N-data:0:7" "$W/latest" || fail "the source topic holds $(cat "$W/latest"), want 7 records"
  stop_worker
}
# A standalone worker (offsets in a local file) with connectors from properties files.
c_standalone() {
  cat >"$W/standalone.properties" <<P
bootstrap.servers=$B
key.converter=org.apache.kafka.connect.storage.StringConverter
value.converter=org.apache.kafka.connect.storage.StringConverter
offset.storage.file.filename=$W/standalone.offsets
offset.flush.interval.ms=1000
listeners=http://127.0.0.1:$PORT
P
  printf 'name=%s\nconnector.class=org.apache.kafka.connect.file.FileStreamSourceConnector\ntasks.max=1\nfile=%s\ntopic=%s\n' \
    "$N-ssource" "$W/sin.txt" "$N-sdata" >"$W/source.properties"
  printf 'name=%s\nconnector.class=org.apache.kafka.connect.file.FileStreamSinkConnector\ntasks.max=1\nfile=%s\ntopics=%s\n' \
    "$N-ssink" "$W/sout.txt" "$N-sdata" >"$W/sink.properties"
  printf 'standalone-%s\n' a b c >"$W/sin.txt"
  start_worker org.apache.kafka.connect.cli.ConnectStandalone "$W/standalone.properties" \
    "$W/source.properties" "$W/sink.properties"
  retry_until 90 lines_in "$W/sout.txt" 3 || { worker_failed "standalone sink has $(cat "$W/sout.txt" 2>/dev/null | wc -l) of 3 lines"; return 1; }
  diff <(printf 'standalone-%s\n' a b c) "$W/sout.txt" >"$W/sdiff" || fail "standalone sink differs: $(head -c 200 "$W/sdiff")"
  local rc=$?
  stop_worker
  return $rc
}

run_case connect.distributed c_distributed
run_case connect.internal_topics c_internal_topics
run_case connect.restart c_restart
run_case connect.standalone c_standalone
