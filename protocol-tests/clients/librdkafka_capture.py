"""Drives librdkafka (confluent-kafka-python) through the APIs skua serves, for capture.py.

    python librdkafka_capture.py HOST:PORT
Topics are prefixed `rdk-` so each client's fixtures replay independently.
"""
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition, libversion
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewPartitions, NewTopic, OffsetSpec, ResourceType)

B = sys.argv[1]
admin = AdminClient({"bootstrap.servers": B})


def wait(futures):
    for f in futures.values():
        f.result(timeout=30)


def produce(topic, n, **conf):
    p = Producer({"bootstrap.servers": B, "linger.ms": 5, **conf})
    for i in range(n):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode() * 10,
                  partition=i % 2 if topic == "rdk-a" else 0, timestamp=1_700_000_000_000 + i)
    assert p.flush(30) == 0


def consume(topic, partition, n):
    c = Consumer({"bootstrap.servers": B, "group.id": "unused", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, partition, 0)])
    got = 0
    deadline = time.time() + 20
    while got < n and time.time() < deadline:
        m = c.poll(1.0)
        if m is not None and not m.error():
            got += 1
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    times = c.offsets_for_times([TopicPartition(topic, partition, 1_700_000_000_002)], timeout=10)
    c.close()
    print(f"consumed {got} from {topic}-{partition}; watermarks {lo}..{hi}; {times}")


print("librdkafka", libversion())
wait(admin.create_topics([NewTopic("rdk-a", 3, 1), NewTopic("rdk-b", 1, 1)]))
time.sleep(0.5)
produce("rdk-a", 20, **{"enable.idempotence": True, "compression.type": "lz4"})
produce("rdk-b", 10, **{"compression.type": "zstd", "acks": "1"})
produce("rdk-b", 10, **{"compression.type": "gzip", "acks": "all"})
consume("rdk-a", 0, 10)
consume("rdk-b", 0, 20)
tp = TopicPartition("rdk-a", 0)
for spec in (OffsetSpec.earliest(), OffsetSpec.latest(), OffsetSpec.max_timestamp()):
    for f in admin.list_offsets({tp: spec}).values():
        print("list_offsets", f.result(timeout=30))
wait(admin.describe_configs([ConfigResource(ResourceType.TOPIC, "rdk-a"),
                             ConfigResource(ResourceType.BROKER, "1")]))
print("cluster", admin.describe_cluster().result(timeout=30))


def consume_in_group(group, protocol):
    """Subscribes in `group`, reads rdk-a, commits synchronously and leaves on close. One
    member per group: the replay sends a client's frames on one connection in capture order,
    so a JoinGroup must never wait for a member whose frames come later."""
    conf = {"bootstrap.servers": B, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
            "group.protocol": protocol}
    if protocol == "classic":
        conf["session.timeout.ms"] = 10000
    c = Consumer(conf)
    c.subscribe(["rdk-a"])
    got = 0
    deadline = time.time() + 20
    while got < 20 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    c.commit(asynchronous=False)
    print(group, protocol, "consumed", got, c.committed(c.assignment(), timeout=10))
    c.close()


consume_in_group("rdk-g", "classic")
consume_in_group("rdk-g848", "consumer")  # KIP-848: ConsumerGroupHeartbeat
print(admin.list_consumer_groups().result(timeout=30).valid)
for f in admin.describe_consumer_groups(["rdk-g", "rdk-g848"]).values():
    print(f.result(timeout=30))
for f in admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("rdk-g")]).values():
    print(f.result(timeout=30))
wait(admin.delete_consumer_groups(["rdk-g", "rdk-g848"]))
# Legacy AlterConfigs replaces the resource's whole dynamic config; the incremental form sets one.
wait(admin.alter_configs([ConfigResource(ResourceType.TOPIC, "rdk-a",
                                         set_config={"retention.ms": "7200000"})]))
wait(admin.incremental_alter_configs([ConfigResource(
    ResourceType.TOPIC, "rdk-a", incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE)])]))
wait(admin.create_partitions([NewPartitions("rdk-b", 2)]))
print(admin.list_topics(timeout=10).topics)
wait(admin.delete_topics(["rdk-b"]))
print("done")
