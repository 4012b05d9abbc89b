# Shared helpers for skua's compatibility suite. Source, don't execute.
# shellcheck shell=bash

COMPAT_DIR="${COMPAT_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
REPO_ROOT="${REPO_ROOT:-$(cd "$COMPAT_DIR/.." && pwd)}"
COMPAT_CACHE="${COMPAT_CACHE:-$COMPAT_DIR/.cache}"
# Kafka version used for the reference broker and for the kafka-*.sh tools.
KAFKA_VERSION="${KAFKA_VERSION:-4.1.2}"

log() { printf '[compat] %s\n' "$*" >&2; }
die() { printf '[compat] error: %s\n' "$*" >&2; exit 2; }

# A free TCP port on 127.0.0.1 (the kernel picks it; tiny race is acceptable).
free_port() {
  python3 - <<'PY'
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
PY
}

# wait_port HOST PORT TIMEOUT_SECONDS [PID]: wait until HOST:PORT accepts a TCP
# connection; fail early if PID (the broker) dies.
wait_port() {
  local host=$1 port=$2 timeout=$3 pid=${4:-}
  local deadline=$((SECONDS + timeout))
  while ((SECONDS < deadline)); do
    if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then return 0; fi
    if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then return 1; fi
    sleep 0.3
  done
  return 1
}

# Directory holding Apache Kafka's jars (broker, tools, clients) for KAFKA_VERSION,
# fetched from Maven Central on first use via compat/kafka/pom.xml.
kafka_libs() {
  local v=${1:-$KAFKA_VERSION}
  # keyed by the pom's content so a changed pom refetches
  local key; key=$(sha256sum "$COMPAT_DIR/kafka/pom.xml" | cut -c1-10)
  local dir="$COMPAT_CACHE/kafka-$v-$key/libs"
  if [[ ! -f "$dir/.complete" ]]; then
    command -v mvn >/dev/null || die "mvn not found (install Maven 3.8+)"
    log "fetching Apache Kafka $v jars from Maven Central into $dir"
    rm -rf "$dir"; mkdir -p "$dir"
    mvn -B -q -f "$COMPAT_DIR/kafka/pom.xml" -Dkafka.version="$v" \
      dependency:copy-dependencies -DoutputDirectory="$dir" >"$dir.mvn.log" 2>&1 \
      || { tail -n 20 "$dir.mvn.log" >&2; die "maven could not fetch Kafka $v"; }
    touch "$dir/.complete"
  fi
  printf '%s\n' "$dir"
}

# apps_libs: prints a dir of Kafka Streams and Kafka Connect jars (compat/apps/pom.xml),
# fetched from Maven Central into $COMPAT_CACHE on first use.
apps_libs() {
  local key; key=$(sha256sum "$COMPAT_DIR/apps/pom.xml" | cut -c1-10)
  local dir="$COMPAT_CACHE/apps-$KAFKA_VERSION-$key/libs"
  if [[ ! -f "$dir/.complete" ]]; then
    command -v mvn >/dev/null || die "mvn not found (install Maven 3.8+)"
    log "fetching Kafka Streams and Connect $KAFKA_VERSION jars from Maven Central into $dir"
    rm -rf "$dir"; mkdir -p "$dir"
    mvn -B -q -f "$COMPAT_DIR/apps/pom.xml" -Dkafka.version="$KAFKA_VERSION" \
      dependency:copy-dependencies -DoutputDirectory="$dir" >"$dir.mvn.log" 2>&1 \
      || { tail -n 20 "$dir.mvn.log" >&2; die "maven could not fetch Kafka Streams/Connect"; }
    touch "$dir/.complete"
  fi
  printf '%s\n' "$dir"
}

# Quiet log4j2 config for Kafka tools (warnings and errors to stderr only).
tools_log4j() {
  local f="$COMPAT_CACHE/tools-log4j2.properties"
  if [[ ! -f $f ]]; then
    mkdir -p "$COMPAT_CACHE"
    cat >"$f" <<'L4J'
status = error
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = STDERR
L4J
  fi
  printf '%s\n' "$f"
}
