"""The Python clients over TLS and SASL, for skua's ssl and sasl compat suites.

    secure_clients.py LIBRARY BOOTSTRAP TOPIC roundtrip|refused [KEY=VALUE...]

LIBRARY is confluent (librdkafka) or kafka-python. The KEY=VALUE settings use
librdkafka's names whatever the library: security.protocol (SSL, SASL_PLAINTEXT or
SASL_SSL), sasl.mechanism, sasl.username, sasl.password, ssl.ca.location,
ssl.certificate.location and ssl.key.location (a client certificate and its key, PEM).

`roundtrip` produces 20 records and consumes them back in a consumer group; `refused`
expects the broker to refuse the client, and prints the client's error: over SASL an
authentication error, over SSL a failed TLS handshake (no client certificate, or one the
broker's truststore does not sign).
"""
import os
import sys
import threading
import time
import uuid

lib, bootstrap, topic, mode = sys.argv[1:5]
conf = dict(a.split("=", 1) for a in sys.argv[5:])
protocol = conf.get("security.protocol", "PLAINTEXT")
sasl = protocol.startswith("SASL_")
tls = protocol in ("SSL", "SASL_SSL")
N = 20
sent = [(f"key-{i}".encode(), f"{lib} value {i} over {protocol}".encode()) for i in range(N)]


def refusal(text):
    """Whether a client's error text says the broker refused it as this protocol would."""
    text = text.lower()
    if sasl:
        return "auth" in text
    # The TLS alert the broker sent (certificate required, unknown CA, bad certificate).
    return any(w in text for w in ("alert", "certificate", "handshake"))


def confluent():
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient

    common = {"bootstrap.servers": bootstrap, **conf}
    if mode == "refused":
        errors = []
        admin = AdminClient({**common, "error_cb": lambda e: errors.append(e)})
        try:
            admin.list_topics(timeout=3)
            raise SystemExit("metadata answered to a client the broker should refuse")
        except ck.KafkaException as e:
            errors.append(e)
        # The refusal reaches error_cb from the client's next poll.
        deadline = time.time() + 10
        while time.time() < deadline and not any(refusal(str(e)) for e in errors):
            admin.poll(0.5)
        print("refused:", errors)
        if not any(refusal(str(e)) for e in errors):
            raise SystemExit(f"no {'authentication' if sasl else 'TLS'} error: {errors}")
        return
    p = ck.Producer(common)
    for k, v in sent:
        p.produce(topic, key=k, value=v, partition=0)
    if p.flush(30) != 0:
        raise SystemExit("records not delivered")
    c = ck.Consumer({**common, "group.id": f"g-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got, deadline = [], time.time() + 40
    while len(got) < N and time.time() < deadline:
        m = c.poll(1.0)
        if m is None:
            continue
        if m.error():
            raise SystemExit(f"consume error: {m.error()}")
        got.append((m.key(), m.value()))
    c.commit(asynchronous=False)
    c.close()
    check(got)


def kafka_python():
    import logging

    import kafka
    from kafka.errors import KafkaError

    common = dict(bootstrap_servers=bootstrap, security_protocol=protocol)
    if sasl:
        common.update(
            sasl_mechanism=conf["sasl.mechanism"],
            sasl_plain_username=conf["sasl.username"],
            sasl_plain_password=conf["sasl.password"],
        )
    if tls:
        common.update(ssl_cafile=conf["ssl.ca.location"], ssl_check_hostname=True)
        if "ssl.certificate.location" in conf:
            common.update(ssl_certfile=conf["ssl.certificate.location"], ssl_keyfile=conf["ssl.key.location"])
    if mode == "refused":
        # kafka-python logs the refusal, then keeps retrying its bootstrap until a
        # timeout: the case ends as soon as the refusal is logged (or the bootstrap
        # gives up, or the broker answers, which fails it).
        def said(m):
            return ("authentication failed" in m.lower()) if sasl else refusal(m)

        seen, done, outcome = [], threading.Event(), {}

        class Keep(logging.Handler):
            def emit(self, record):
                seen.append(record.getMessage())
                if said(seen[-1]):
                    done.set()

        logging.getLogger("kafka").addHandler(Keep())
        logging.getLogger("kafka").setLevel(logging.INFO)

        def attempt():
            try:
                kafka.KafkaAdminClient(request_timeout_ms=5000, bootstrap_timeout_ms=30000, **common).list_topics()
                outcome["answered"] = True
            except KafkaError as e:
                outcome["error"] = e
            done.set()

        threading.Thread(target=attempt, daemon=True).start()
        done.wait(40)
        refused = [m for m in seen if said(m)]
        print("refused:", refused[:1], repr(outcome.get("error")), flush=True)
        if outcome.get("answered"):
            print("metadata answered to a client the broker should refuse", file=sys.stderr, flush=True)
            os._exit(1)
        if not refused:
            print(f"no {'authentication' if sasl else 'TLS'} error logged: {seen[-3:]}", file=sys.stderr, flush=True)
            os._exit(1)
        os._exit(0)  # the client's own threads are still retrying
    p = kafka.KafkaProducer(**common)
    for k, v in sent:
        p.send(topic, key=k, value=v, partition=0)
    p.flush(30)
    p.close()
    c = kafka.KafkaConsumer(
        topic,
        group_id=f"g-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        consumer_timeout_ms=30000,
        **common,
    )
    got = []
    for m in c:
        got.append((m.key, m.value))
        if len(got) == N:
            break
    c.commit()
    c.close()
    check(got)


def check(got):
    if got != sent:
        raise SystemExit(f"consumed {len(got)} records, not the {N} sent: {got[:3]}")
    print(f"{N} records produced and consumed back")


{"confluent": confluent, "kafka-python": kafka_python}[lib]()
