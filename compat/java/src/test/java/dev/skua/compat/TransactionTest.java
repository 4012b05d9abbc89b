package dev.skua.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.admin.Admin;
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
}
