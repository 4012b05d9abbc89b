"""Drives librdkafka's transactional producer (confluent-kafka-python) for capture.py: one
transaction committed, one aborted, then a read_committed read.

    python librdkafka_txn_capture.py HOST:PORT
Its frames carry the producer ids the broker handed out, so they are captured and
replayed on a broker of their own (see README.md). Topics are prefixed `rdktxn-`.
"""
import sys

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

B = sys.argv[1]
admin = AdminClient({"bootstrap.servers": B})
for f in admin.create_topics([NewTopic("rdktxn-a", 1, 1)]).values():
    f.result(timeout=30)
p = Producer({"bootstrap.servers": B, "transactional.id": "rdktxn-id"})
p.init_transactions(30)
for commit in (True, False):
    p.begin_transaction()
    for i in range(3):
        p.produce("rdktxn-a", value=f"v{i}".encode(), partition=0)
    p.flush(30)
    if commit:
        p.commit_transaction(30)
    else:
        p.abort_transaction(30)
c = Consumer({"bootstrap.servers": B, "group.id": "rdktxn-unused", "isolation.level": "read_committed",
              "enable.auto.commit": False})
c.assign([TopicPartition("rdktxn-a", 0, 0)])
got = 0
for _ in range(50):
    m = c.poll(0.2)
    if m is not None and not m.error():
        got += 1
    if got >= 3:
        break
c.close()
print("read committed", got)
