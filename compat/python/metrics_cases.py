"""skua compatibility suite: the metrics endpoint, read by Prometheus' own parsers.

    python metrics_cases.py HOST:PORT

COMPAT_METRICS names the endpoint (host:port of `metrics.listener`); without it (a
broker not started by scripts/compat's single-node mode) the cases are skipped.
After a produce and a consume through kafka-python, a scrape must parse with
prometheus_client's text parser and its (strict) OpenMetrics parser, and show Kafka's
names (as the JMX exporter with Strimzi's rules makes them) moved by what was done.
"""
import os
import sys
import time
import urllib.request

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from casekit import bootstrap, check, run, topic_name

B = bootstrap()
METRICS = os.environ.get("COMPAT_METRICS")
CASES = ["metrics.traffic", "metrics.text_format_parses", "metrics.openmetrics_parses", "metrics.moves_with_traffic"]
RECORDS = 50
VALUE = b"v" * 100

if not METRICS:
    for c in CASES:
        print(f"SKIP {c}: no metrics endpoint (COMPAT_METRICS unset)", flush=True)
    sys.exit(0)


def scrape(accept=None):
    req = urllib.request.Request(f"http://{METRICS}/metrics")
    if accept:
        req.add_header("Accept", accept)
    with urllib.request.urlopen(req, timeout=20) as resp:
        return resp.headers.get("Content-Type"), resp.read().decode("utf-8")


def samples(families):
    """(name, frozenset(labels)) -> value for every sample."""
    out = {}
    for f in families:
        for s in f.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


TOPIC = topic_name("metrics")


def traffic():
    a = KafkaAdminClient(bootstrap_servers=B, request_timeout_ms=30000)
    try:
        a.create_topics([NewTopic(TOPIC, 1, 1)])
    finally:
        a.close()
    p = KafkaProducer(bootstrap_servers=B, linger_ms=0)
    for i in range(RECORDS):
        p.send(TOPIC, value=VALUE, partition=0)
    p.flush(30)
    p.close()
    c = KafkaConsumer(TOPIC, bootstrap_servers=B, auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=15000)
    got = sum(1 for _ in zip(range(RECORDS), c))
    c.close()
    check(got == RECORDS, f"consumed {got} of {RECORDS}")


def text_format_parses():
    ctype, text = scrape()
    check(ctype.startswith("text/plain; version=0.0.4"), ctype)
    names = {f.name for f in text_string_to_metric_families(text)}
    for want in ["kafka_server_brokertopicmetrics_bytesin",
                 "kafka_network_requestmetrics_requests",
                 "kafka_server_replicamanager_underreplicatedpartitions",
                 "kafka_controller_kafkacontroller_activecontrollercount",
                 "process_cpu_seconds"]:
        check(want in names, f"{want} not among {sorted(names)[:20]}...")


def openmetrics_parses():
    ctype, text = scrape("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
    check(ctype.startswith("application/openmetrics-text; version=1.0.0"), ctype)
    fams = {f.name: f for f in openmetrics_families(text)}
    check(fams["kafka_server_brokertopicmetrics_bytesin"].type == "counter", "bytesin is a counter")
    check(fams["kafka_network_requestmetrics_totaltimems"].type == "summary", "totaltimems is a summary")
    check(fams["skua_network_requestmetrics_totaltime_microseconds"].type == "histogram",
          "the µs times are a histogram")


def moves_with_traffic():
    s = samples(text_string_to_metric_families(scrape()[1]))
    t = frozenset({("topic", TOPIC)})

    def get(name, labels=frozenset()):
        v = s.get((name, labels))
        check(v is not None, f"{name}{dict(labels)} not scraped")
        return v

    messages = get("kafka_server_brokertopicmetrics_messagesin_total", t)
    check(messages == RECORDS, f"messages in {messages}, produced {RECORDS}")
    bytes_in = get("kafka_server_brokertopicmetrics_bytesin_total", t)
    check(bytes_in >= RECORDS * len(VALUE), f"bytes in {bytes_in} < payload")
    bytes_out = get("kafka_server_brokertopicmetrics_bytesout_total", t)
    check(bytes_out >= RECORDS * len(VALUE), f"bytes out {bytes_out} < payload")
    check(get("kafka_server_brokertopicmetrics_messagesin_total") >= messages, "all topics")
    produce = sum(v for (n, l), v in s.items()
                  if n == "kafka_network_requestmetrics_requests_total" and ("request", "Produce") in l)
    check(produce >= 1, "Produce requests counted")
    check(get("kafka_controller_kafkacontroller_activecontrollercount") == 1, "one active controller")
    check(get("kafka_server_replicamanager_underreplicatedpartitions") == 0, "nothing under-replicated")


run("metrics.traffic", traffic)
run("metrics.text_format_parses", text_format_parses)
run("metrics.openmetrics_parses", openmetrics_parses)
run("metrics.moves_with_traffic", moves_with_traffic)
