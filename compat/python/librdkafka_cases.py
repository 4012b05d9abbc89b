"""skua compatibility suite: librdkafka through confluent-kafka-python.

    python librdkafka_cases.py HOST:PORT
"""
import logging
import sys
import time
import zlib

from confluent_kafka import (OFFSET_BEGINNING, AcknowledgeType, Consumer, KafkaError, KafkaException,
                             Producer, ShareConsumer, TopicPartition, libversion)
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic,
                                   ResourceType)

from casekit import CaseFailed, bootstrap, check, java_partition, run, topic_name

B = bootstrap()
BASE_TS = 1_700_000_000_000


_ADMIN = None


def admin():
    global _ADMIN  # one handle: futures fail if their AdminClient is destroyed
    if _ADMIN is None:
        _ADMIN = AdminClient({"bootstrap.servers": B})
    return _ADMIN


def create_topic(name, partitions=1, config=None):
    fs = admin().create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                         config=config or {})], operation_timeout=30)
    fs[name].result(timeout=30)
    deadline = time.time() + 20
    while time.time() < deadline:
        md = admin().list_topics(topic=name, timeout=10)
        t = md.topics.get(name)
        if t and not t.error and len(t.partitions) == partitions and all(p.leader >= 0 for p in t.partitions.values()):
            return
        time.sleep(0.2)
    raise RuntimeError(f"topic {name} has no leaders")


def delete_topic(name):
    try:
        admin().delete_topics([name], operation_timeout=30)[name].result(timeout=30)
    except Exception:  # noqa: BLE001 - cleanup only
        pass


def produce(topic, records, **conf):
    """records: list of dicts for Producer.produce; returns the delivered messages in order."""
    delivered, errors = [], []

    def cb(err, msg):
        (errors if err else delivered).append(err or msg)

    p = Producer({"bootstrap.servers": B, "linger.ms": 5, **conf})
    for r in records:
        while True:
            try:
                p.produce(topic, on_delivery=cb, **r)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    left = p.flush(30)
    check(left == 0, f"{left} messages not delivered")
    check(not errors, f"delivery errors: {errors[:3]}")
    return delivered


def consume_all(topic, partition, n, **conf):
    return consume_partitions(topic, [partition], n, **conf)


def consume_partitions(topic, partitions, n, **conf):
    """n messages read from the start of the partitions, all assigned to one consumer."""
    c = Consumer({"bootstrap.servers": B, "group.id": "unused-assign-only", "enable.auto.commit": False,
                  "enable.auto.offset.store": False, **conf})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    out = []
    deadline = time.time() + 40
    try:
        while len(out) < n and time.time() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.5):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(m.error())
                out.append(m)
    finally:
        c.close()
    return out


def records(n, size=60):
    return [{"key": f"key-{i}".encode(), "value": (f"value-{i}-" * 20).encode()[:size] + str(i).encode(),
             "headers": [("h-index", str(i).encode()), ("h-empty", b"")],
             "timestamp": BASE_TS + i, "partition": 0} for i in range(n)]


def verify(sent, got):
    check(len(got) == len(sent), f"read {len(got)} of {len(sent)} records")
    for i, (s, m) in enumerate(zip(sent, got)):
        check(m.offset() == i, f"record {i}: offset {m.offset()}")
        check(m.key() == s["key"], f"record {i}: key {m.key()!r}")
        check(m.value() == s["value"], f"record {i}: value mismatch")
        check(m.timestamp() == (1, s["timestamp"]), f"record {i}: timestamp {m.timestamp()}")
        hs = m.headers() or []
        check([(k, v or b"") for k, v in hs] == s["headers"], f"record {i}: headers {hs}")


def produce_consume(codec, idempotent=False, n=500):
    t = topic_name(f"rdk-{codec}")
    create_topic(t)
    try:
        sent = records(n)
        conf = {"compression.type": codec}
        if idempotent:
            conf.update({"enable.idempotence": True, "acks": "all", "max.in.flight.requests.per.connection": 5,
                         "batch.num.messages": 50})
        dl = produce(t, sent, **conf)
        check([m.offset() for m in dl] == list(range(n)), "delivery offsets are not dense and ordered")
        verify(sent, consume_all(t, 0, n))
    finally:
        delete_topic(t)


def topic_compression(codec):
    """A topic whose compression.type differs from the producer's codec: the broker re-encodes
    each batch, and librdkafka reads back exactly what was sent."""
    t = topic_name(f"rdk-topic-{codec}")
    create_topic(t, config={"compression.type": codec})
    try:
        # Current timestamps: Kafka's retention would delete records as old as BASE_TS
        # whenever its periodic check happens to run during the case.
        now = int(time.time() * 1000)
        sent = [{**r, "timestamp": now + i} for i, r in enumerate(records(300))]
        producer_codec = "none" if codec != "uncompressed" else "lz4"
        produce(t, sent[:150], **{"compression.type": producer_codec})
        produce(t, sent[150:], **{"compression.type": "gzip" if codec != "gzip" else "zstd"})
        verify(sent, consume_all(t, 0, len(sent)))
    finally:
        delete_topic(t)


def timestamp_out_of_range():
    """A CreateTime two hours ahead is beyond message.timestamp.after.max.ms (Kafka 4: one
    hour): the delivery fails with INVALID_TIMESTAMP and nothing is stored."""
    t = topic_name("rdk-future")
    create_topic(t)
    try:
        errors = []
        p = Producer({"bootstrap.servers": B, "linger.ms": 5, "compression.type": "zstd",
                      "message.send.max.retries": 0})
        p.produce(t, value=b"from the future", partition=0, timestamp=int(time.time() * 1000) + 7_200_000,
                  on_delivery=lambda err, msg: errors.append(err))
        check(p.flush(30) == 0, "not delivered")
        check(errors and errors[0] is not None and errors[0].code() == KafkaError.INVALID_TIMESTAMP,
              f"delivery error {errors}")
        c = Consumer({"bootstrap.servers": B, "group.id": "unused-assign-only"})
        try:
            lo, hi = c.get_watermark_offsets(TopicPartition(t, 0), timeout=15)
            check((lo, hi) == (0, 0), f"watermarks {(lo, hi)}")
        finally:
            c.close()
    finally:
        delete_topic(t)


def keyed(partitioner, expect):
    parts = 6
    t = topic_name(f"rdk-keyed-{partitioner}")
    create_topic(t, parts)
    try:
        keys = [f"user-{k}".encode() for k in range(40)]
        recs = [{"key": k, "value": f"{k.decode()}:{r}".encode()} for r in range(5) for k in keys]
        dl = produce(t, recs, partitioner=partitioner)
        placement = {}
        for m in dl:
            placement.setdefault(m.key(), set()).add(m.partition())
        for k, ps in placement.items():
            check(len(ps) == 1, f"key {k!r} went to partitions {ps}")
            want = expect(k, parts)
            check(ps == {want}, f"key {k!r} placed in {ps}, {partitioner} says {want}")
        # read every partition back: each key only in its partition, per-key order kept
        for p in range(parts):
            mine = [k for k in keys if expect(k, parts) == p]
            got = consume_all(t, p, 5 * len(mine))
            check(len(got) == 5 * len(mine), f"partition {p}: {len(got)} records, want {5 * len(mine)}")
            rounds = {}
            for m in got:
                k, r = m.value().decode().rsplit(":", 1)
                check(k.encode() in mine, f"key {k} read from partition {p}")
                check(int(r) == rounds.get(k, 0), f"key {k}: round {r} out of order")
                rounds[k] = int(r) + 1
    finally:
        delete_topic(t)


def large_message():
    t = topic_name("rdk-large")
    create_topic(t)
    try:
        sent = [{"key": b"big", "value": bytes(range(256)) * 3900, "headers": [], "timestamp": BASE_TS, "partition": 0}]
        produce(t, sent, **{"message.max.bytes": 1_100_000})
        got = consume_all(t, 0, 1)
        check(len(got) == 1 and got[0].value() == sent[0]["value"], "large value differs")
    finally:
        delete_topic(t)


class _Lines(logging.Handler):
    """A logging handler that keeps every message (librdkafka's log, through `logger`)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def fetch_below_batch(limits):
    """Fetch limits below one batch (KIP-74): partition p of a four-partition topic holds p
    uncompressed batches of 64 messages of 1000 bytes (about 64 KiB each), then a batch of
    one small message, read by one consumer with `limits` below a batch. The broker must
    return the first partition's first batch whole and never a cut-off piece of a batch
    as a partition's only content; every message is read, in order, none twice."""
    parts, per_batch = 4, 64
    t = topic_name("rdk-fetch-below-batch")
    create_topic(t, parts)
    try:
        sent = {p: [] for p in range(parts)}
        # one producer per round, flushed: each round is one batch per partition; big
        # batches first, then each partition's small last one, which leaves most of a
        # small fetch.max.bytes to the next partition
        for rnd in range(parts + 1):
            recs = []
            for p in range(parts):
                n = per_batch if rnd < p else 1 if rnd == parts else 0
                for _ in range(n):
                    i = len(sent[p])
                    fill = bytes([ord("a") + (i + p) % 26])
                    value = f"p{p}-{i}-".encode().ljust(100 if rnd == parts else 1000, fill)
                    sent[p].append(value)
                    recs.append({"key": f"k{i}".encode(), "value": value, "partition": p})
            if recs:
                produce(t, recs, **{"compression.type": "none", "linger.ms": 10_000})
        # librdkafka copes with a partition answered with only a cut-off piece of a batch
        # by doubling its fetch size for the partition and fetching again; it says so in
        # its fetch debug log, which a broker following KIP-74 never makes it write
        log = logging.getLogger(t)
        log.propagate, lines = False, _Lines()
        log.addHandler(lines)
        log.setLevel(logging.DEBUG)
        got = consume_partitions(t, range(parts), sum(map(len, sent.values())),
                                 **limits, debug="fetch", logger=log)
        cut = [m for m in lines.messages if "Increasing max fetch bytes" in m]
        check(not cut, f"{len(cut)} times a partition was answered with only a cut-off piece of a batch:"
                       f" {cut[0][cut[0].find('Topic'):] if cut else ''}")
        for p in range(parts):
            mine = [m for m in got if m.partition() == p]
            check(len(mine) == len(sent[p]), f"partition {p}: read {len(mine)} of {len(sent[p])} messages")
            for i, m in enumerate(mine):
                check(m.offset() == i and m.value() == sent[p][i],
                      f"partition {p}: message {i} at offset {m.offset()} differs")
    finally:
        delete_topic(t)


def admin_topics():
    t1, t2 = topic_name("rdk-adm-a"), topic_name("rdk-adm-b")
    a = admin()
    fs = a.create_topics([NewTopic(t1, 3, 1), NewTopic(t2, 1, 1)], operation_timeout=30)
    for f in fs.values():
        f.result(timeout=30)
    again = a.create_topics([NewTopic(t1, 3, 1)], operation_timeout=30)[t1]
    try:
        again.result(timeout=30)
        raise AssertionError("second create of the same topic succeeded")
    except KafkaException as e:
        check(e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS, f"second create: {e}")
    md = a.list_topics(timeout=10)
    check(t1 in md.topics and t2 in md.topics, "created topics not listed")
    check(len(md.topics[t1].partitions) == 3, "partition count")
    for f in a.delete_topics([t1, t2], operation_timeout=30).values():
        f.result(timeout=30)
    deadline = time.time() + 20
    while time.time() < deadline:
        md = a.list_topics(timeout=10)
        if t1 not in md.topics and t2 not in md.topics:
            return
        time.sleep(0.3)
    raise AssertionError("deleted topics still listed")


def offsets_for_times():
    t = topic_name("rdk-times")
    create_topic(t)
    try:
        produce(t, [{"value": f"v{i}".encode(), "timestamp": BASE_TS + 1000 * i, "partition": 0} for i in range(10)])
        c = Consumer({"bootstrap.servers": B, "group.id": "unused-assign-only"})
        try:
            r = c.offsets_for_times([TopicPartition(t, 0, BASE_TS + 3500)], timeout=15)
            check(r[0].offset == 4, f"offset for ts+3500: {r[0].offset}")
            r = c.offsets_for_times([TopicPartition(t, 0, BASE_TS)], timeout=15)
            check(r[0].offset == 0, f"offset for ts: {r[0].offset}")
            r = c.offsets_for_times([TopicPartition(t, 0, BASE_TS + 10_000_000)], timeout=15)
            check(r[0].offset in (-1, 10), f"offset past the end: {r[0].offset}")
            lo, hi = c.get_watermark_offsets(TopicPartition(t, 0), timeout=15)
            check((lo, hi) == (0, 10), f"watermarks {(lo, hi)}")
        finally:
            c.close()
    finally:
        delete_topic(t)


def group_subscribe():
    t = topic_name("rdk-group")
    create_topic(t, 2)
    try:
        produce(t, [{"key": str(i).encode(), "value": f"v{i}".encode()} for i in range(20)])
        g = topic_name("rdk-g")
        conf = {"bootstrap.servers": B, "group.id": g, "auto.offset.reset": "earliest", "enable.auto.commit": False}
        c = Consumer(conf)
        c.subscribe([t])
        seen = set()
        deadline = time.time() + 40
        while len(seen) < 20 and time.time() < deadline:
            for m in c.consume(100, 0.5):
                if not m.error():
                    seen.add(m.value())
        check(len(seen) == 20, f"consumed {len(seen)} of 20 via the group")
        c.commit(asynchronous=False)
        committed = c.committed([TopicPartition(t, 0), TopicPartition(t, 1)], timeout=15)
        check(sum(tp.offset for tp in committed) == 20, f"committed {committed}")
        c.close()
    finally:
        delete_topic(t)


# A group member as its own process, so the case can kill -9 it: prints ASSIGN lines
# and one line per record value, committing synchronously after each poll batch.
MEMBER = r"""
import sys, time
from confluent_kafka import Consumer
bootstrap, topic, group = sys.argv[1:4]
out = open(sys.argv[4], "a", buffering=1)
def on_assign(c, parts):
    out.write("ASSIGN " + ",".join(str(p.partition) for p in parts) + "\n")
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
              "partition.assignment.strategy": "range"})
c.subscribe([topic], on_assign=on_assign)
while True:
    batch = c.consume(50, 0.2)
    for m in batch:
        if not m.error():
            out.write(m.value().decode() + "\n")
            time.sleep(0.002)
    if batch:
        c.commit(asynchronous=False)
"""


def group_failover_kill9():
    """Three members over six partitions get two each; one is killed with SIGKILL; the
    others take its partitions after the session timeout and, with synchronous commits,
    every record is consumed at least once."""
    import os, signal, subprocess, sys, tempfile
    t = topic_name("rdk-failover")
    n = 3000
    create_topic(t, 6)
    tmp = tempfile.mkdtemp()
    procs = []
    try:
        produce(t, [{"key": str(i).encode(), "value": f"r{i}".encode()} for i in range(n)])
        g = topic_name("rdk-failover-g")
        files = [os.path.join(tmp, f"m{i}.txt") for i in range(3)]
        for f in files:
            procs.append(subprocess.Popen([sys.executable, "-c", MEMBER, B, t, g, f]))

        def lines(f):
            try:
                return open(f).read().split()
            except FileNotFoundError:
                return []

        def current_assignments():
            out = []
            for f in files:
                assigns = [l for l in open(f).read().splitlines() if l.startswith("ASSIGN ")] if os.path.exists(f) else []
                out.append(assigns[-1][7:].split(",") if assigns and assigns[-1][7:] else [])
            return out

        deadline = time.time() + 20
        while time.time() < deadline and sorted(len(a) for a in current_assignments()) != [2, 2, 2]:
            time.sleep(0.1)
        check(sorted(len(a) for a in current_assignments()) == [2, 2, 2],
              f"three members should hold two partitions each: {current_assignments()}")
        time.sleep(0.5)
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait()
        expected = {f"r{i}" for i in range(n)}
        deadline = time.time() + 30
        seen = set()
        while time.time() < deadline:
            seen = {v for f in files for v in lines(f) if v.startswith("r")}
            if seen >= expected:
                break
            time.sleep(0.5)
        missing = expected - seen
        check(not missing, f"{len(missing)} records never consumed after the failover, e.g. {sorted(missing)[:5]}")
        survivors = current_assignments()[1:]
        check(sorted(len(a) for a in survivors) == [3, 3], f"survivors should hold three partitions each: {survivors}")
    finally:
        for p in procs:
            p.kill()
            p.wait()
        delete_topic(t)


def group_cooperative_sticky():
    """Cooperative-sticky: a third member joining two moves only the partitions it must
    take; the first two keep the rest throughout. A second group then reads every record
    independently of the first."""
    t = topic_name("rdk-coop")
    create_topic(t, 6)
    members = []
    try:
        produce(t, [{"key": str(i).encode(), "value": f"c{i}".encode()} for i in range(600)])
        g = topic_name("rdk-coop-g")
        conf = {"bootstrap.servers": B, "group.id": g, "auto.offset.reset": "earliest",
                "partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500}

        def settle(want, seconds=30):
            deadline = time.time() + seconds
            while time.time() < deadline:
                for c in members:
                    c.poll(0.05)
                sets = [{p.partition for p in c.assignment()} for c in members]
                if sorted(len(x) for x in sets) == want and len(set().union(*sets)) == 6:
                    return sets
            raise CaseFailed(f"assignment did not settle to {want}: {[{p.partition for p in c.assignment()} for c in members]}")

        for _ in range(2):
            c = Consumer(conf)
            c.subscribe([t])
            members.append(c)
        before = settle([3, 3])
        c = Consumer(conf)
        c.subscribe([t])
        members.append(c)
        after = settle([2, 2, 2])
        for old, new in zip(before, after[:2]):
            check(new <= old, f"a member gained or swapped partitions: {old} -> {new}")
        moved = (before[0] - after[0]) | (before[1] - after[1])
        check(moved == after[2] and len(moved) == 2, f"exactly the newcomer's two partitions move: {moved}, newcomer {after[2]}")

        other = Consumer({"bootstrap.servers": B, "group.id": topic_name("rdk-coop-other"),
                          "auto.offset.reset": "earliest"})
        other.subscribe([t])
        seen = set()
        deadline = time.time() + 30
        while len(seen) < 600 and time.time() < deadline:
            for m in other.consume(200, 0.5):
                if not m.error():
                    seen.add(m.value())
        other.close()
        check(len(seen) == 600, f"a second group read {len(seen)} of 600 records")
    finally:
        for c in members:
            c.close()
        delete_topic(t)


def generation(consumer):
    """The generation a member is in, from librdkafka's serialized group metadata
    (rd_kafka_consumer_group_metadata_write: "CGMDv2:", then the generation id as a
    native-endian int32)."""
    md = consumer.consumer_group_metadata()
    check(md[:7] == b"CGMDv2:", f"unknown group metadata format {md[:7]!r}")
    return int.from_bytes(md[7:11], sys.byteorder, signed=True)


def group_static_membership():
    """Static membership (KIP-345): of two members with a group.instance.id, one is
    closed, which for a static member sends no LeaveGroup, and comes back under the
    same instance id within session.timeout.ms. It gets the same partitions, and the
    group does not rebalance: same generation, and the other member sees no revoke or
    assign."""
    t = topic_name("rdk-static")
    create_topic(t, 4)
    g = topic_name("rdk-static-g")
    events = {"a": [], "b": []}
    members = {}

    def start(instance):
        c = Consumer({"bootstrap.servers": B, "group.id": g, "group.instance.id": instance,
                      "session.timeout.ms": 30000, "heartbeat.interval.ms": 500,
                      "partition.assignment.strategy": "range", "auto.offset.reset": "earliest"})
        c.subscribe([t],
                    on_assign=lambda _c, ps: events[instance].append(("assign", sorted(p.partition for p in ps))),
                    on_revoke=lambda _c, ps: events[instance].append(("revoke", sorted(p.partition for p in ps))))
        members[instance] = c
        return c

    def poll_all(seconds, until=lambda: False):
        deadline = time.time() + seconds
        while time.time() < deadline and not until():
            for c in members.values():
                c.poll(0.05)

    def owned(instance):
        return sorted(p.partition for p in members[instance].assignment())

    def described():
        d = admin().describe_consumer_groups([g], request_timeout=15)[g].result(timeout=15)
        return {m.group_instance_id: (m.member_id, sorted(tp.partition for tp in m.assignment.topic_partitions))
                for m in d.members}

    try:
        start("a")
        start("b")
        poll_all(30, lambda: len(owned("a")) == 2 and len(owned("b")) == 2)
        check(len(owned("a")) == 2 and len(owned("b")) == 2,
              f"two members should hold two partitions each: a {owned('a')}, b {owned('b')}")
        a_parts, b_parts, gen = owned("a"), owned("b"), generation(members["b"])
        before = described()
        b_events = len(events["b"])

        members.pop("a").close()
        # No LeaveGroup: the static member stays in the group until its session times out.
        after_close = described()
        check(set(after_close) == {"a", "b"}, f"after closing a, the group lists {after_close}")

        a2 = start("a")
        poll_all(20, lambda: len(owned("a")) > 0)
        check(owned("a") == a_parts, f"the restarted static member got {owned('a')}, had {a_parts}")
        poll_all(3)  # several heartbeats: a rebalance would have reached b by now
        check(events["b"][b_events:] == [], f"b saw a rebalance: {events['b'][b_events:]}")
        check(owned("b") == b_parts, f"b's partitions changed: {b_parts} -> {owned('b')}")
        check(generation(members["b"]) == gen and generation(a2) == gen,
              f"generation {gen} became {generation(members['b'])} (b), {generation(a2)} (a)")
        now = described()
        check(now["a"][1] == a_parts and now["b"] == before["b"], f"described before {before}, now {now}")
        check(now["a"][0] != before["a"][0], "the restarted member should have a new member id")
    finally:
        for c in members.values():
            c.close()
        delete_topic(t)


def transactions():
    t = topic_name("rdk-txn")
    create_topic(t)
    try:
        p = Producer({"bootstrap.servers": B, "transactional.id": topic_name("rdk-tid")})
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(5):
            p.produce(t, value=f"c{i}".encode(), partition=0)
        p.commit_transaction(30)
        p.begin_transaction()
        for i in range(5):
            p.produce(t, value=f"a{i}".encode(), partition=0)
        p.flush(30)
        p.abort_transaction(30)
        got = consume_all(t, 0, 5, **{"isolation.level": "read_committed"})
        check([m.value() for m in got] == [f"c{i}".encode() for i in range(5)],
              f"read_committed saw {[m.value() for m in got]}")
    finally:
        delete_topic(t)


def share_consumer():
    """librdkafka's share consumer (KIP-932, preview since 2.13) in explicit acknowledgement
    mode on a one-partition topic of 100 records, share.auto.offset.reset=earliest: the first
    record it gets is released and must come back with delivery count 2, the second is
    rejected and never comes back, every other one is accepted and comes once with count 1.
    After it closes (leaving the group) a new member gets nothing."""
    n = 100
    t, group = topic_name("rdk-share"), topic_name("rdk-share-group")
    create_topic(t)
    try:
        res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
        admin().incremental_alter_configs([res])[res].result(timeout=30)
        produce(t, [{"value": f"s{i}".encode(), "partition": 0} for i in range(n)])

        def member():
            c = ShareConsumer({"bootstrap.servers": B, "group.id": group,
                               "share.acknowledgement.mode": "explicit"})
            c.subscribe([t])
            return c

        seen, released, rejected = {}, None, None
        c = member()
        try:
            deadline = time.time() + 45
            while time.time() < deadline and not (len(seen) == n and released and len(seen[released]) == 2):
                for m in c.poll(0.5):
                    if m.error():
                        raise KafkaException(m.error())
                    v = m.value().decode()
                    seen.setdefault(v, []).append(m.delivery_count())
                    if released is None:
                        released, kind = v, AcknowledgeType.RELEASE
                    elif rejected is None and v != released:
                        rejected, kind = v, AcknowledgeType.REJECT
                    else:
                        kind = AcknowledgeType.ACCEPT
                    c.acknowledge(m, kind)
                c.commit_sync(30)
        finally:
            c.close()
        bad = [f"{v}: counts {seen.get(v)}" for v in (f"s{i}" for i in range(n))
               if seen.get(v) != ([1, 2] if v == released else [1])]
        check(len(seen) == n and not bad, f"released {released}, rejected {rejected}, {len(seen)} of {n} "
              f"values: {bad[:5]}")

        c = member()
        try:
            again, deadline = [], time.time() + 5
            while time.time() < deadline:
                for m in c.poll(0.5):
                    if not m.error():
                        again.append((m.value(), m.delivery_count()))
                        c.acknowledge(m)
                if again:
                    c.commit_sync(30)
        finally:
            c.close()
        check(not again, f"a new member got {len(again)} records after all were acknowledged: {again[:5]}")
    finally:
        delete_topic(t)


if __name__ == "__main__":
    print(f"# confluent-kafka with librdkafka {libversion()[0]}", flush=True)
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        run(f"librdkafka.produce_consume.{codec}", produce_consume, codec)
    run("librdkafka.idempotent.lz4", produce_consume, "lz4", True, 3000)
    run("librdkafka.idempotent.zstd", produce_consume, "zstd", True, 3000)
    run("librdkafka.keyed.murmur2_random", keyed, "murmur2_random", java_partition)
    run("librdkafka.keyed.consistent_random", keyed, "consistent_random",
        lambda k, n: (zlib.crc32(k) & 0xFFFFFFFF) % n)
    run("librdkafka.large_message", large_message)
    run("librdkafka.fetch_below_batch.max_partition_fetch_bytes", fetch_below_batch,
        {"max.partition.fetch.bytes": 1024})
    # librdkafka's smallest fetch.max.bytes: at least message.max.bytes, itself at least 1000
    run("librdkafka.fetch_below_batch.fetch_max_bytes", fetch_below_batch,
        {"fetch.max.bytes": 1000, "message.max.bytes": 1000})
    run("librdkafka.admin.topics", admin_topics)
    run("librdkafka.offsets_for_times", offsets_for_times)
    for codec in ("uncompressed", "gzip", "snappy", "lz4", "zstd"):
        run(f"librdkafka.topic_compression.{codec}", topic_compression, codec)
    run("librdkafka.timestamp_out_of_range", timestamp_out_of_range)
    run("librdkafka.group.subscribe_commit", group_subscribe)
    run("librdkafka.group.failover_kill9", group_failover_kill9)
    run("librdkafka.group.cooperative_sticky", group_cooperative_sticky)
    run("librdkafka.group.static_membership", group_static_membership)
    run("librdkafka.txn.commit_abort", transactions)
    run("librdkafka.share.release_reject_accept", share_consumer)
