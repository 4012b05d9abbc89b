"""Drives kafka-python through the APIs skua serves, for capture.py.

    python kafka_python_capture.py HOST:PORT
Topics are prefixed `kpy-` so each client's fixtures replay independently.
"""
import sys
import time

import kafka
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic

B = sys.argv[1]
print("kafka-python", kafka.__version__)
admin = KafkaAdminClient(bootstrap_servers=B)
admin.create_topics([NewTopic("kpy-a", 2, 1), NewTopic("kpy-b", 1, 1)])
time.sleep(0.5)
for codec, extra in (("lz4", {"enable_idempotence": True}), ("gzip", {})):
    p = KafkaProducer(bootstrap_servers=B, compression_type=codec, linger_ms=5, **extra)
    for i in range(20):
        p.send("kpy-a", key=f"k{i}".encode(), value=f"value-{i}".encode(), partition=i % 2,
               timestamp_ms=1_700_000_000_000 + i)
    p.flush()
    p.close()
c = KafkaConsumer(bootstrap_servers=B, enable_auto_commit=False, consumer_timeout_ms=3000,
                  fetch_max_wait_ms=100)
tp = TopicPartition("kpy-a", 0)
c.assign([tp])
c.seek_to_beginning(tp)
print("consumed", sum(1 for _ in c))
print(c.beginning_offsets([tp]), c.end_offsets([tp]), c.offsets_for_times({tp: 1_700_000_000_004}))
c.close()
print(admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kpy-a"),
                              ConfigResource(ConfigResourceType.BROKER, "1")]))
# A group member (one per group: the replay cannot wait on a member whose frames come later).
c = KafkaConsumer("kpy-a", bootstrap_servers=B, group_id="kpy-g", enable_auto_commit=False,
                  auto_offset_reset="earliest", consumer_timeout_ms=4000, fetch_max_wait_ms=100)
print("group consumed", sum(1 for _ in c))
c.commit()
print(c.committed(TopicPartition("kpy-a", 0)))
c.close()
print(admin.list_groups())
print(admin.describe_groups(["kpy-g"]))
print(admin.list_group_offsets({"kpy-g": None}))
print(admin.delete_group_offsets("kpy-g", [TopicPartition("kpy-a", 1)]))
print(admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kpy-a",
                                          configs={"retention.ms": "7200000"})]))
print(admin.delete_groups(["kpy-g"]))
admin.create_partitions({"kpy-b": NewPartitions(2)})
print(admin.describe_topics(["kpy-a", "kpy-b"]))
try:
    print(admin.describe_cluster())
except Exception as e:  # noqa: BLE001 - older kafka-python has no DescribeCluster
    print("describe_cluster:", e)
admin.delete_topics(["kpy-b"])
admin.close()
print("done")
