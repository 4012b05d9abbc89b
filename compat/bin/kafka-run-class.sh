#!/usr/bin/env bash
# Runs a class from Apache Kafka's jars (fetched from Maven Central on first use), like
# Kafka's own bin/kafka-run-class.sh. KAFKA_VERSION selects the version (default 4.1.2);
# KAFKA_HEAP_OPTS / KAFKA_OPTS are honoured.
set -euo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../lib/common.sh"
(($#)) || die "usage: kafka-run-class.sh CLASS [ARGS...]"
cls=$1; shift
libs=$(kafka_libs "$KAFKA_VERSION")
# shellcheck disable=SC2086
exec java ${KAFKA_HEAP_OPTS:--Xmx512m} -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto \
  -Djava.awt.headless=true -Dlog4j2.configurationFile="$(tools_log4j)" ${KAFKA_OPTS:-} \
  -cp "$libs/*" "$cls" "$@"
