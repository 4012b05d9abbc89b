"""skua compatibility suite: kafka-python (pure Python client with its own codecs).

    python kafka_python_cases.py HOST:PORT
"""
import time

import kafka
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewPartitions, NewTopic
from kafka.errors import TopicAlreadyExistsError

from casekit import bootstrap, check, java_partition, run, topic_name

B = bootstrap()
BASE_TS = 1_700_000_000_000


def admin():
    return KafkaAdminClient(bootstrap_servers=B, request_timeout_ms=30000)


def create_topic(name, partitions=1):
    a = admin()
    try:
        a.create_topics([NewTopic(name, partitions, 1)])
    finally:
        a.close()
    wait_leaders(name, partitions)


def wait_leaders(name, partitions):
    c = KafkaConsumer(bootstrap_servers=B)
    try:
        deadline = time.time() + 20
        while time.time() < deadline:
            ps = c.partitions_for_topic(name)
            if ps and len(ps) == partitions:
                return
            time.sleep(0.3)
        raise RuntimeError(f"topic {name} never showed {partitions} partitions")
    finally:
        c.close()


def delete_topic(name):
    try:
        a = admin()
        a.delete_topics([name])
        a.close()
    except Exception:  # noqa: BLE001 - cleanup only
        pass


def read_back(topic, partition, n):
    c = KafkaConsumer(bootstrap_servers=B, group_id=None, enable_auto_commit=False,
                      max_partition_fetch_bytes=2 * 1024 * 1024)
    tp = TopicPartition(topic, partition)
    c.assign([tp])
    c.seek_to_beginning(tp)
    out = []
    deadline = time.time() + 40
    try:
        while len(out) < n and time.time() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                out.extend(recs)
    finally:
        c.close()
    return out


def produce_consume(codec, n=300, **extra):
    t = topic_name(f"kp-{codec}")
    create_topic(t)
    try:
        p = KafkaProducer(bootstrap_servers=B, compression_type=None if codec == "none" else codec,
                          acks="all", linger_ms=5, **extra)
        sent = []
        futs = []
        for i in range(n):
            r = dict(key=f"key-{i}".encode(), value=(f"value-{i}-" * 15).encode(),
                     headers=[("h-index", str(i).encode()), ("h-empty", b"")], timestamp_ms=BASE_TS + i)
            sent.append(r)
            futs.append(p.send(t, partition=0, **r))
        p.flush(30)
        offs = [f.get(timeout=30).offset for f in futs]
        p.close()
        check(offs == list(range(n)), "ack offsets are not dense and ordered")
        got = read_back(t, 0, n)
        check(len(got) == n, f"read {len(got)} of {n}")
        for i, (s, m) in enumerate(zip(sent, got)):
            check(m.offset == i, f"record {i}: offset {m.offset}")
            check(m.key == s["key"] and m.value == s["value"], f"record {i}: key/value mismatch")
            check(m.timestamp == s["timestamp_ms"] and m.timestamp_type == 0, f"record {i}: timestamp {m.timestamp}")
            check([(k, v or b"") for k, v in m.headers] == s["headers"], f"record {i}: headers {m.headers}")
    finally:
        delete_topic(t)


def keyed():
    parts = 4
    t = topic_name("kp-keyed")
    create_topic(t, parts)
    try:
        p = KafkaProducer(bootstrap_servers=B)
        futs = [(k, p.send(t, key=f"k{k}".encode(), value=b"x")) for k in range(40)]
        p.flush(30)
        for k, f in futs:
            md = f.get(timeout=30)
            check(md.partition == java_partition(f"k{k}".encode(), parts),
                  f"key k{k} -> partition {md.partition}, murmur2 says {java_partition(f'k{k}'.encode(), parts)}")
        p.close()
    finally:
        delete_topic(t)


def admin_topics():
    t = topic_name("kp-admin")
    a = admin()
    try:
        a.create_topics([NewTopic(t, 2, 1)])
        try:
            a.create_topics([NewTopic(t, 2, 1)])
            raise AssertionError("second create of the same topic succeeded")
        except TopicAlreadyExistsError:
            pass
        wait_leaders(t, 2)
        check(t in a.list_topics(), "created topic not listed")
        d = a.describe_topics([t])
        check(len(d) == 1 and len(d[0]["partitions"]) == 2, f"describe: {d}")
        for p in d[0]["partitions"]:
            leader = p.get("leader_id", p.get("leader"))
            replicas = p.get("replica_nodes", p.get("replicas"))
            isr = p.get("isr_nodes", p.get("isr"))
            check(leader >= 0 and replicas == [leader] and isr == [leader], f"partition {p}")
        a.create_partitions({t: NewPartitions(total_count=4)})
        wait_leaders(t, 4)
        a.delete_topics([t])
        deadline = time.time() + 20
        while t in a.list_topics():
            check(time.time() < deadline, "deleted topic still listed")
            time.sleep(0.3)
    finally:
        a.close()


def offsets():
    t = topic_name("kp-offsets")
    create_topic(t)
    try:
        p = KafkaProducer(bootstrap_servers=B)
        for i in range(10):
            p.send(t, partition=0, value=b"v", timestamp_ms=BASE_TS + 1000 * i)
        p.flush(30)
        p.close()
        c = KafkaConsumer(bootstrap_servers=B)
        tp = TopicPartition(t, 0)
        try:
            check(c.beginning_offsets([tp])[tp] == 0, "beginning offset")
            check(c.end_offsets([tp])[tp] == 10, "end offset")
            r = c.offsets_for_times({tp: BASE_TS + 3500})[tp]
            check(r is not None and r.offset == 4 and r.timestamp == BASE_TS + 4000, f"offsets_for_times: {r}")
        finally:
            c.close()
    finally:
        delete_topic(t)


def group_subscribe():
    t = topic_name("kp-group")
    create_topic(t, 2)
    try:
        p = KafkaProducer(bootstrap_servers=B)
        for i in range(20):
            p.send(t, key=str(i).encode(), value=f"v{i}".encode())
        p.flush(30)
        p.close()
        c = KafkaConsumer(t, bootstrap_servers=B, group_id=topic_name("kp-g"), auto_offset_reset="earliest",
                          enable_auto_commit=False)
        seen = set()
        deadline = time.time() + 40
        while len(seen) < 20 and time.time() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                seen.update(r.value for r in recs)
        check(len(seen) == 20, f"consumed {len(seen)} of 20 via the group")
        c.commit()
        total = sum(c.committed(TopicPartition(t, i)) or 0 for i in range(2))
        check(total == 20, f"committed offsets sum to {total}")
        c.close()
    finally:
        delete_topic(t)


if __name__ == "__main__":
    print(f"# kafka-python {kafka.__version__}", flush=True)
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        run(f"kafkapython.produce_consume.{codec}", produce_consume, codec)
    run("kafkapython.idempotent", lambda: produce_consume("lz4", 1000, enable_idempotence=True))
    run("kafkapython.keyed_partitioning", keyed)
    run("kafkapython.admin.topics", admin_topics)
    run("kafkapython.offsets", offsets)
    run("kafkapython.group.subscribe_commit", group_subscribe)
