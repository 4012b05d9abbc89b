package dev.skua.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
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

    private static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
