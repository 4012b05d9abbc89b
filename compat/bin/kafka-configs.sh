#!/usr/bin/env bash
# Apache Kafka's kafka-configs.sh (main class kafka.admin.ConfigCommand), run from the Maven-fetched jars.
exec "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/kafka-run-class.sh" kafka.admin.ConfigCommand "$@"
