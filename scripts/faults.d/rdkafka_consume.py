"""The --group round's member as librdkafka runs it (confluent-kafka-python), the same
contract as FaultClient's `consume`: reads at most PER_PARTITION records of each
partition and MAX in all, commits synchronously exactly what it read (retried until it
lands), writes "partition offset value" lines to OUT_FILE and prints "committed P O" for
what it committed. Stops after 20 s without a record.

    rdkafka_consume.py BOOTSTRAP TOPIC GROUP PER_PARTITION MAX OUT_FILE [classic|consumer]
"""

import sys
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition


def main():
    bs, topic, group, per_partition, limit, out_file = sys.argv[1:7]
    protocol = sys.argv[7] if len(sys.argv) > 7 else "classic"
    per_partition, limit = int(per_partition), int(limit)
    conf = {
        "bootstrap.servers": bs,
        "group.id": group,
        "group.protocol": protocol,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "topic.metadata.refresh.interval.ms": 2000,
    }
    if protocol == "classic":
        conf["session.timeout.ms"] = 10000
    c = Consumer(conf)
    c.subscribe([topic])
    per_part, committed, got = {}, {}, 0
    idle_since = time.monotonic()
    with open(out_file, "w") as out:
        while got < limit and time.monotonic() - idle_since < 20:
            batch = c.consume(num_messages=500, timeout=0.5)
            read = {}
            for m in batch:
                if m.error():
                    print(f"consume error: {m.error()}", file=sys.stderr)
                    continue
                if got == limit:
                    break
                p = m.partition()
                per_part[p] = per_part.get(p, 0) + 1
                # Past its share of a partition the record is neither counted nor
                # committed: the next member reads it.
                if per_part[p] > per_partition:
                    continue
                out.write(f"{p} {m.offset()} {m.value().decode()}\n")
                read[p] = m.offset() + 1
                got += 1
            if not read:
                continue
            idle_since = time.monotonic()
            offsets = [TopicPartition(topic, p, o) for p, o in read.items()]
            while True:
                try:
                    answered = c.commit(offsets=offsets, asynchronous=False)
                    failed = [tp for tp in answered or [] if tp.error]
                    if not failed:
                        break
                    print(f"commit retried: {failed}", file=sys.stderr)
                except KafkaException as e:
                    print(f"commit retried: {e}", file=sys.stderr)
                time.sleep(0.5)
            committed.update(read)
    c.close()
    for p in sorted(committed):
        print(f"committed {p} {committed[p]}")


if __name__ == "__main__":
    main()
