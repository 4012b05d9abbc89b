#!/usr/bin/env bash
# Runs a class from Apache Kafka's jars (fetched from Maven Central on first use), like
# Kafka's own bin/kafka-run-class.sh. KAFKA_VERSION selects the version (default 4.1.2);
# KAFKA_HEAP_OPTS / KAFKA_OPTS are honoured; COMPAT_TOOL_TIMEOUT=SECONDS kills the tool
# after that long (the compatibility suite sets it so a silent broker cannot hang a run).
set -euo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../lib/common.sh"
(($#)) || die "usage: kafka-run-class.sh CLASS [ARGS...]"
cls=$1; shift
libs=$(kafka_libs "$KAFKA_VERSION")
limit=()
[[ -n ${COMPAT_TOOL_TIMEOUT:-} ]] && limit=(timeout -k 5 "$COMPAT_TOOL_TIMEOUT")
# shellcheck disable=SC2086
exec "${limit[@]}" java ${KAFKA_HEAP_OPTS:--Xmx512m} -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto \
  -Djava.awt.headless=true -Dlog4j2.configurationFile="$(tools_log4j)" ${KAFKA_OPTS:-} \
  -cp "$libs/*" "$cls" "$@"
