#!/usr/bin/env bash
# skua compatibility suite: share groups (KIP-932) with Apache Kafka's KafkaShareConsumer.
#   compat/share/share.sh HOST:PORT
# Prints one PASS/FAIL line per case (compat/share/ShareCases.java, run from source with
# kafka-clients 4.4.0, since share groups are production-ready from Kafka 4.2 and the Java
# suite's Maven project pins 4.1). About 15 seconds.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../lib/common.sh"
B=${1:?usage: share.sh HOST:PORT}
libs=$(kafka_libs "${SHARE_KAFKA_VERSION:-4.4.0}") || exit 1
echo "# kafka-clients ${SHARE_KAFKA_VERSION:-4.4.0}"
timeout -k 10 150 java -cp "$libs/*" "$here/ShareCases.java" "$B"
