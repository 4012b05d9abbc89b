"""librdkafka side of the migration suite (compat/migration/migration.sh).

    mig.py create BOOTSTRAP
    mig.py topics BOOTSTRAP TOPIC...                 1-partition topics
    mig.py produce BOOTSTRAP TOPIC COUNT FIRST       idempotent producer, values TOPIC-<i>
    mig.py snapshot BOOTSTRAP OUT TOPIC...           every record, one line each
    mig.py group BOOTSTRAP GROUP TOPIC COUNT         consume COUNT records in a group, commit
    mig.py writer BOOTSTRAP TOPIC STOPFILE SUMMARY   one idempotent producer writing until STOPFILE
    mig.py check-writer BOOTSTRAP TOPIC SUMMARY      every acknowledged write is there exactly once
    mig.py security BOOTSTRAP SASL_BOOTSTRAP         the ACLs, quota and SCRAM user Kafka made
                                                     are enforced (see security())

Exits non-zero with a one-line reason on stderr when something is wrong.
"""
import json
import os
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def die(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)


def create(bs, topics=None):
    admin = AdminClient({"bootstrap.servers": bs})
    futures = admin.create_topics(topics or [
        NewTopic("mig", 3, 1, config={"retention.ms": "604800000"}),
        NewTopic("migc", 2, 1, config={"cleanup.policy": "compact"}),
        NewTopic("migp", 2, 1),
    ])
    for f in futures.values():
        f.result(30)


def produce(bs, topic, count, first):
    errors = []
    p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5})
    parts = len(p.list_topics(topic, timeout=20).topics[topic].partitions)
    for i in range(first, first + count):
        key = f"key-{i % 17}".encode()
        p.produce(topic, key=key, value=f"{topic}-{i}".encode(), partition=i % parts,
                  on_delivery=lambda err, _m: err and errors.append(str(err)))
        p.poll(0)
    left = p.flush(60)
    if left or errors:
        die(f"produce to {topic}: {left} unflushed, errors {errors[:3]}")


def partitions(consumer, topic):
    md = consumer.list_topics(topic, timeout=20).topics[topic]
    if md.error:
        die(f"{topic}: {md.error}")
    return sorted(md.partitions)


def read_all(bs, topic):
    """Every record of `topic` from each partition's start to its high watermark."""
    c = Consumer({"bootstrap.servers": bs, "group.id": "mig-reader", "enable.auto.commit": False})
    out = []
    for p in partitions(c, topic):
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=20)
        if hi <= lo:
            continue
        c.assign([TopicPartition(topic, p, lo)])
        deadline = time.time() + 60
        while time.time() < deadline:
            m = c.poll(1)
            if m is None:
                continue
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF:
                    die(f"{topic}-{p}: {m.error()}")
                continue
            out.append((topic, p, m.offset(), (m.key() or b"").decode(), (m.value() or b"").decode()))
            if m.offset() >= hi - 1:
                break
        else:
            die(f"{topic}-{p}: did not reach offset {hi}")
    c.close()
    return out


def snapshot(bs, path, topics):
    rows = []
    for t in topics:
        rows.extend(read_all(bs, t))
    with open(path, "w") as f:
        for r in sorted(rows):
            f.write(" ".join(map(str, r)) + "\n")


def group(bs, group_id, topic, count):
    """Consumes `count` records as a member of `group_id` and commits them; prints the
    first offset it got from each partition and the count."""
    c = Consumer({"bootstrap.servers": bs, "group.id": group_id, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    first, got, deadline = {}, 0, time.time() + 60
    while got < count and time.time() < deadline:
        m = c.poll(1)
        if m is None or m.error():
            continue
        first.setdefault(m.partition(), m.offset())
        got += 1
        c.commit(message=m, asynchronous=False)
    # Nothing more must come: the group's records end here.
    extra = c.poll(3)
    c.close()
    for p in sorted(first):
        print(f"first {p} {first[p]}")
    print(f"count {got}")
    if extra is not None and not extra.error():
        print(f"extra {extra.partition()} {extra.offset()}")


def writer(bs, topic, stopfile, summary):
    """One idempotent producer writing value N to partition N % 2, every 20 ms, until the
    stop file appears; it keeps going while brokers are swapped under it."""
    acked, errors = [], []

    def done(err, m):
        if err:
            errors.append(str(err))
        else:
            acked.append(int(m.value()))

    p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5,
                  "message.timeout.ms": 300000, "reconnect.backoff.max.ms": 500})
    sent = 0
    while not os.path.exists(stopfile):
        try:
            p.produce(topic, value=str(sent).encode(), partition=sent % 2, on_delivery=done)
            sent += 1
        except BufferError:
            pass
        p.poll(0.02)
    left = p.flush(120)
    # Written whole or not at all: the checker may look while the flush above still runs
    # (its shell may not be the writer's parent, so it cannot wait for it).
    with open(summary + ".tmp", "w") as f:
        json.dump({"sent": sent, "unflushed": left, "acked": sorted(acked), "errors": errors[:20]}, f)
    os.replace(summary + ".tmp", summary)


def check_writer(bs, topic, summary):
    deadline = time.time() + 180
    while not os.path.exists(summary) and time.time() < deadline:
        time.sleep(0.5)
    s = json.load(open(summary))
    if s["errors"] or s["unflushed"]:
        die(f"writer saw errors {s['errors'][:3]}, {s['unflushed']} unflushed of {s['sent']}")
    if len(s["acked"]) != s["sent"]:
        die(f"writer sent {s['sent']}, {len(s['acked'])} acknowledged")
    seen = {}
    for _t, p, off, _k, v in read_all(bs, topic):
        n = int(v)
        if n % 2 != p:
            die(f"value {n} in partition {p}")
        if n in seen:
            die(f"value {n} stored twice (offsets {seen[n]} and {off})")
        seen[n] = off
    missing = [n for n in s["acked"] if n not in seen]
    if missing:
        die(f"{len(missing)} acknowledged writes missing, first {missing[:5]}")
    for part in (0, 1):
        vals = [n for n, _ in sorted(((n, o) for n, o in seen.items() if n % 2 == part), key=lambda x: x[1])]
        if vals != sorted(vals):
            die(f"partition {part} out of order")
    print(f"{s['sent']} writes, each stored once, in order")


def produce_one(conf, topic):
    """Produces one record with `conf`; the delivery error's code, or None."""
    result = []
    p = Producer({"message.timeout.ms": 10000, **conf})
    p.produce(topic, value=b"v", on_delivery=lambda err, _m: result.append(err))
    p.flush(15)
    if not result:
        die(f"produce to {topic}: no delivery report")
    return result[0] and result[0].code()


def security(bs, sasl_bs):
    """What Kafka's tools set up (compat/migration/migration.sh, security_writes) holds:
    User:ANONYMOUS may not write topics prefixed deny- (PREFIXED DENY) nor read alice-only
    (LITERAL DENY), the SCRAM user alice may write deny-x (PREFIXED ALLOW) with her
    password and is refused with another, and User:ANONYMOUS with the client id
    quota-client is throttled (producer_byte_rate=50000)."""
    anonymous = {"bootstrap.servers": bs}
    code = produce_one(anonymous, "deny-x")
    if code != KafkaError.TOPIC_AUTHORIZATION_FAILED:
        die(f"User:ANONYMOUS wrote to deny-x: {code}")
    c = Consumer({**anonymous, "group.id": "mig-denied", "enable.auto.commit": False})
    c.subscribe(["alice-only"])
    denied, deadline = None, time.time() + 15
    while denied is None and time.time() < deadline:
        m = c.poll(1)
        if m is not None and m.error():
            denied = m.error().code()
    c.close()
    if denied != KafkaError.TOPIC_AUTHORIZATION_FAILED:
        die(f"User:ANONYMOUS reading alice-only got {denied}, not TOPIC_AUTHORIZATION_FAILED")

    alice = {"bootstrap.servers": sasl_bs, "security.protocol": "SASL_PLAINTEXT",
             "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice"}
    code = produce_one({**alice, "sasl.password": "alice-pw"}, "deny-x")
    if code is not None:
        die(f"User:alice could not write to deny-x: {code}")
    errors = []
    p = Producer({**alice, "sasl.password": "wrong", "error_cb": lambda e: errors.append(e.code())})
    deadline = time.time() + 10
    while KafkaError._AUTHENTICATION not in errors and time.time() < deadline:
        p.poll(0.1)  # (error_cb runs in poll)
    if KafkaError._AUTHENTICATION not in errors:
        die(f"alice with a wrong password: errors {errors}, no authentication failure")
    try:
        p.list_topics(timeout=1)
        die("alice with a wrong password got metadata")
    except KafkaException:
        pass

    # producer_byte_rate=50000: 200 KB take seconds, and the broker says it throttled.
    throttles = []
    p = Producer({"bootstrap.servers": bs, "client.id": "quota-client", "linger.ms": 0,
                  "batch.size": 20000,
                  "throttle_cb": lambda e: throttles.append(e.throttle_time)})
    started = time.time()
    for _ in range(20):
        p.produce("quota-t", value=b"q" * 10000)
        p.flush(30)
    took = time.time() - started
    p.poll(1)
    if not [t for t in throttles if t > 0]:
        die(f"quota-client was not throttled ({took:.1f} s for 200 KB)")
    if took < 1.5:
        die(f"quota-client wrote 200 KB in {took:.1f} s against 50000 bytes/s")
    print(f"quota-client: 200 KB in {took:.1f} s, throttled {len(throttles)} times")


def main(argv):
    cmd, bs, rest = argv[1], argv[2], argv[3:]
    if cmd == "create":
        create(bs)
    elif cmd == "topics":
        create(bs, [NewTopic(t, 1, 1) for t in rest])
    elif cmd == "produce":
        produce(bs, rest[0], int(rest[1]), int(rest[2]))
    elif cmd == "snapshot":
        snapshot(bs, rest[0], rest[1:])
    elif cmd == "group":
        group(bs, rest[0], rest[1], int(rest[2]))
    elif cmd == "writer":
        writer(bs, rest[0], rest[1], rest[2])
    elif cmd == "check-writer":
        check_writer(bs, rest[0], rest[1])
    elif cmd == "security":
        security(bs, rest[0])
    else:
        die(f"unknown command {cmd}")


if __name__ == "__main__":
    main(sys.argv)
