"""SASL round trips for the Python clients of skua's sasl compat suite.

    clients.py LIBRARY BOOTSTRAP PROTOCOL MECHANISM USER PASSWORD CA TOPIC roundtrip|refused

LIBRARY is confluent (librdkafka) or kafka-python. `roundtrip` produces 20 records and
consumes them back in a consumer group; `refused` expects the broker to refuse the
credentials, and prints the client's error.
"""
import sys
import time
import uuid

lib, bootstrap, protocol, mechanism, user, password, ca, topic, mode = sys.argv[1:10]
N = 20
sent = [(f"key-{i}".encode(), f"{lib} value {i} over {protocol}".encode()) for i in range(N)]


def confluent():
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient

    common = {
        "bootstrap.servers": bootstrap,
        "security.protocol": protocol,
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    if protocol == "SASL_SSL":
        common["ssl.ca.location"] = ca
    if mode == "refused":
        errors = []
        admin = AdminClient({**common, "error_cb": lambda e: errors.append(e)})
        try:
            admin.list_topics(timeout=5)
            raise SystemExit("metadata answered with a wrong password")
        except ck.KafkaException as e:
            errors.append(e)
        # The authentication error reaches error_cb from the client's next poll.
        deadline = time.time() + 10
        while time.time() < deadline and not any("auth" in str(e).lower() for e in errors):
            admin.poll(0.5)
        print("refused:", errors)
        if not any("auth" in str(e).lower() for e in errors):
            raise SystemExit(f"no authentication error: {errors}")
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
    import kafka
    from kafka.errors import KafkaError

    common = dict(
        bootstrap_servers=bootstrap,
        security_protocol=protocol,
        sasl_mechanism=mechanism,
        sasl_plain_username=user,
        sasl_plain_password=password,
    )
    if protocol == "SASL_SSL":
        common.update(ssl_cafile=ca, ssl_check_hostname=True)
    if mode == "refused":
        # kafka-python reports a refused authentication in its log, and the bootstrap
        # then fails: both are checked.
        import logging

        seen = []

        class Keep(logging.Handler):
            def emit(self, record):
                seen.append(record.getMessage())

        logging.getLogger("kafka").addHandler(Keep())
        logging.getLogger("kafka").setLevel(logging.INFO)
        try:
            kafka.KafkaAdminClient(request_timeout_ms=5000, **common).list_topics()
        except KafkaError as e:
            auth = [m for m in seen if "authentication failed" in m.lower()]
            print("refused:", repr(e), auth[:1])
            if not auth:
                raise SystemExit(f"no authentication error logged: {e!r} {seen[-3:]}")
            return
        raise SystemExit("metadata answered with a wrong password")
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
