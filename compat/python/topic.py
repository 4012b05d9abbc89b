"""Create or delete topics quickly (librdkafka admin), for shell-driven suites.

    python topic.py HOST:PORT create NAME PARTITIONS
    python topic.py HOST:PORT delete NAME...
"""
import sys
import time

from confluent_kafka.admin import AdminClient, NewTopic

b, op, *args = sys.argv[1:]
a = AdminClient({"bootstrap.servers": b})
if op == "create":
    name, parts = args[0], int(args[1])
    a.create_topics([NewTopic(name, parts, 1)], operation_timeout=30)[name].result(timeout=30)
    deadline = time.time() + 20
    while time.time() < deadline:
        t = a.list_topics(topic=name, timeout=10).topics.get(name)
        if t and not t.error and len(t.partitions) == parts and all(p.leader >= 0 for p in t.partitions.values()):
            sys.exit(0)
        time.sleep(0.2)
    sys.exit(f"topic {name} has no leaders")
elif op == "delete":
    if args:
        for f in a.delete_topics(args, operation_timeout=30).values():
            try:
                f.result(timeout=30)
            except Exception as e:  # noqa: BLE001
                print(e, file=sys.stderr)
else:
    sys.exit(f"unknown op {op}")
