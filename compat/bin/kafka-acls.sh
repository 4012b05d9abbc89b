#!/usr/bin/env bash
# Apache Kafka's kafka-acls.sh (main class org.apache.kafka.tools.AclCommand), run from the Maven-fetched jars.
exec "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/kafka-run-class.sh" org.apache.kafka.tools.AclCommand "$@"
