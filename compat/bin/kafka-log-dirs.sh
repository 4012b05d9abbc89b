#!/usr/bin/env bash
# Apache Kafka's kafka-log-dirs.sh (main class org.apache.kafka.tools.LogDirsCommand), run from the Maven-fetched jars.
exec "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/kafka-run-class.sh" org.apache.kafka.tools.LogDirsCommand "$@"
