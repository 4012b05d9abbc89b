#!/usr/bin/env bash
# skua compatibility suite: share groups (KIP-932) with Apache Kafka's KafkaShareConsumer.
#   compat/share/share.sh HOST:PORT [CASE...]
# Prints one PASS/FAIL line per case (compat/share/ShareCases.java, run from source with
# kafka-clients 4.4.0, since share groups are production-ready from Kafka 4.2 and the Java
# suite's Maven project pins 4.1). About 60 seconds (the kill -9 case
# waits for the dead member's 10 s session timeout).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../lib/common.sh"
B=${1:?usage: share.sh HOST:PORT [CASE...]}
shift
libs=$(kafka_libs "${SHARE_KAFKA_VERSION:-4.4.0}") || exit 1
echo "# kafka-clients ${SHARE_KAFKA_VERSION:-4.4.0}"
timeout -k 10 170 java -Dshare.source="$here/ShareCases.java" -cp "$libs/*" "$here/ShareCases.java" "$B" "$@"
