#!/usr/bin/env bash
# Apache Kafka's kafka-storage.sh (main class kafka.tools.StorageTool), run from the Maven-fetched jars.
exec "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/kafka-run-class.sh" kafka.tools.StorageTool "$@"
