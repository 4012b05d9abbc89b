package dev.skua.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/** Transactional producer with read_committed / read_uncommitted consumers. */
@ExtendWith(CaseReporter.class)
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TransactionTest {

    @Test @DisplayName("java.txn.commit_abort")
    void commitAndAbort() throws Exception {
        String topic = Support.topicName("txn");
        Support.createTopic(topic, 1);
        try {
            Properties p = Support.producerProps();
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "compat-java-txn-" + UUID.randomUUID());
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
                producer.initTransactions();
                producer.beginTransaction();
                for (int i = 0; i < 5; i++) producer.send(new ProducerRecord<>(topic, 0, null, b("committed-" + i)));
                producer.commitTransaction();
                producer.beginTransaction();
                for (int i = 0; i < 5; i++) producer.send(new ProducerRecord<>(topic, 0, null, b("aborted-" + i)));
                producer.flush();
                producer.abortTransaction();
                producer.beginTransaction();
                producer.send(new ProducerRecord<>(topic, 0, null, b("committed-5")));
                producer.commitTransaction();
            }
            TopicPartition tp = new TopicPartition(topic, 0);
            List<ConsumerRecord<byte[], byte[]>> rc = Support.readAll(tp, 6,
                    Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"));
            assertEquals(6, rc.size(), "read_committed sees only committed records");
            for (int i = 0; i < 6; i++) assertEquals("committed-" + i, new String(rc.get(i).value(), StandardCharsets.UTF_8));
            List<ConsumerRecord<byte[], byte[]>> ru = Support.readAll(tp, 11,
                    Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted"));
            assertEquals(11, ru.size(), "read_uncommitted sees aborted records too");
        } finally {
            Support.deleteTopicQuietly(topic);
        }
    }

    /**
     * Consume-transform-produce with sendOffsetsToTransaction: each input record becomes
     * one output record and its offset is committed in the same transaction. One
     * transaction is aborted; the next consumer of the group resumes from the offset
     * committed before it, so read_committed sees every output exactly once.
     */
    @Test @DisplayName("java.txn.consume_transform_produce")
    void consumeTransformProduce() throws Exception {
        String in = Support.topicName("ctp-in"), out = Support.topicName("ctp-out");
        String group = "compat-java-ctp-" + UUID.randomUUID();
        Support.createTopic(in, 1);
        Support.createTopic(out, 1);
        TopicPartition inTp = new TopicPartition(in, 0), outTp = new TopicPartition(out, 0);
        try {
            try (KafkaProducer<byte[], byte[]> plain = new KafkaProducer<>(Support.producerProps())) {
                for (int i = 0; i < 10; i++) plain.send(new ProducerRecord<>(in, 0, null, b("in-" + i)));
            }
            Properties pp = Support.producerProps();
            pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "compat-java-ctp-" + UUID.randomUUID());
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
                producer.initTransactions();
                // Records 0-5 committed, record 6 aborted; then a new consumer goes on.
                transform(producer, group, in, out, 7, 6);
                transform(producer, group, in, out, 4, 4);
            }
            List<ConsumerRecord<byte[], byte[]>> rc = Support.readAll(outTp, 10,
                    Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"));
            List<String> got = new ArrayList<>();
            for (ConsumerRecord<byte[], byte[]> r : rc) got.add(new String(r.value(), StandardCharsets.UTF_8));
            List<String> want = new ArrayList<>();
            for (int i = 0; i < 10; i++) want.add("out-in-" + i);
            assertEquals(want, got, "every input transformed exactly once");
            try (Admin admin = Admin.create(Support.adminProps())) {
                Map<TopicPartition, OffsetAndMetadata> committed =
                        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
                assertEquals(10L, committed.get(inTp).offset(), "the group's committed offset");
            }
        } finally {
            Support.deleteTopicQuietly(in);
            Support.deleteTopicQuietly(out);
        }
    }

    /** Processes `count` records of `in` into `out` for `group`, one transaction each; only the first `commits` commit. */
    private static void transform(KafkaProducer<byte[], byte[]> producer, String group, String in, String out,
                                  int count, int commits) {
        Properties cp = Support.consumerProps();
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 1);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp)) {
            consumer.subscribe(List.of(in));
            int done = 0;
            long deadline = System.currentTimeMillis() + 40_000;
            while (done < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    producer.beginTransaction();
                    producer.send(new ProducerRecord<>(out, 0, null, b("out-" + new String(r.value(), StandardCharsets.UTF_8))));
                    producer.sendOffsetsToTransaction(
                            Map.of(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1)),
                            consumer.groupMetadata());
                    if (done < commits) producer.commitTransaction();
                    else producer.abortTransaction();
                    done++;
                }
            }
            assertEquals(count, done, "records processed");
        }
    }

    private static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /**
     * A compacted topic written by committed and aborted transactions (3 MB over 1 MB
     * segments, so the cleaner reaches the first ones) is read back, once cleaned, by a
     * read_committed and a read_uncommitted consumer: the latest committed value of every
     * key, no aborted value, fewer records than were committed. The consumers read the
     * segments the broker's cleaner rewrote: rebuilt transactional batches, markers kept,
     * stamped or removed, and batches cut to their headers.
     */
    @Test @DisplayName("java.txn.compacted_readback")
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void compactedReadback() throws Exception {
        String topic = Support.topicName("txn-compacted");
        try (Admin admin = Admin.create(Support.adminProps())) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1).configs(Map.of(
                    "cleanup.policy", "compact",
                    "segment.bytes", "1048576",
                    "min.cleanable.dirty.ratio", "0.01",
                    "delete.retention.ms", "1000"))))
                    .all().get(30, TimeUnit.SECONDS);
        }
        try {
            String pad = "x".repeat(1000);
            Map<String, String> latest = new HashMap<>();
            int committed = 0;
            Properties p = Support.producerProps();
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "compat-java-txn-compacted-" + UUID.randomUUID());
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
                producer.initTransactions();
                for (int t = 0; t < 30; t++) {
                    // Aborted transactions early on, in the segments the cleaner reaches.
                    boolean abort = t < 10 && t % 3 == 1;
                    producer.beginTransaction();
                    for (int i = 0; i < 100; i++) {
                        String key = "k" + (i % 30);
                        String value = (abort ? "aborted-" : "committed-") + t + "-" + i + "-" + pad;
                        producer.send(new ProducerRecord<>(topic, 0, b(key), b(value)));
                        if (!abort) latest.put(key, value);
                    }
                    if (abort) {
                        producer.flush();
                        producer.abortTransaction();
                    } else {
                        producer.commitTransaction();
                        committed += 100;
                    }
                }
            }
            TopicPartition tp = new TopicPartition(topic, 0);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(200);
            String why = "";
            while (System.nanoTime() < deadline) {
                why = checkCompacted(tp, "read_committed", latest, committed);
                if (why.isEmpty()) why = checkCompacted(tp, "read_uncommitted", latest, committed);
                if (why.isEmpty()) return;
                Thread.sleep(2000);
            }
            throw new AssertionError(why);
        } finally {
            Support.deleteTopicQuietly(topic);
        }
    }

    /** Reads the partition to its end; "" when it reads as cleaned, else what is wrong. */
    private static String checkCompacted(TopicPartition tp, String isolation, Map<String, String> want,
            int committed) {
        Properties p = Support.consumerProps();
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        Map<String, String> got = new HashMap<>();
        int records = 0;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long end = c.endOffsets(List.of(tp)).get(tp);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (c.position(tp) < end) {
                if (System.nanoTime() > deadline) return isolation + ": stuck at " + c.position(tp) + " of " + end;
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                    String v = new String(r.value(), StandardCharsets.UTF_8);
                    if (v.startsWith("aborted-")) return isolation + ": an aborted record at " + r.offset();
                    got.put(new String(r.key(), StandardCharsets.UTF_8), v);
                    records++;
                }
            }
        }
        if (!got.equals(want)) return isolation + ": latest values differ";
        if (records >= committed) return isolation + ": " + records + " records read, not compacted yet";
        return "";
    }
}
