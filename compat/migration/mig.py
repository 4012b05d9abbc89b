"""librdkafka side of the migration suite (compat/migration/migration.sh).

    mig.py create BOOTSTRAP
    mig.py produce BOOTSTRAP TOPIC COUNT FIRST       idempotent producer, values TOPIC-<i>
    mig.py snapshot BOOTSTRAP OUT TOPIC...           every record, one line each
    mig.py group BOOTSTRAP GROUP TOPIC COUNT         consume COUNT records in a group, commit
    mig.py writer BOOTSTRAP TOPIC STOPFILE SUMMARY   one idempotent producer writing until STOPFILE
    mig.py check-writer BOOTSTRAP TOPIC SUMMARY      every acknowledged write is there exactly once

Exits non-zero with a one-line reason on stderr when something is wrong.
"""
import json
import os
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def die(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)


def create(bs):
    admin = AdminClient({"bootstrap.servers": bs})
    futures = admin.create_topics([
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
    with open(summary, "w") as f:
        json.dump({"sent": sent, "unflushed": left, "acked": sorted(acked), "errors": errors[:20]}, f)


def check_writer(bs, topic, summary):
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


def main(argv):
    cmd, bs, rest = argv[1], argv[2], argv[3:]
    if cmd == "create":
        create(bs)
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
    else:
        die(f"unknown command {cmd}")


if __name__ == "__main__":
    main(sys.argv)
