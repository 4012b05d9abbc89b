package dev.skua.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** Shared helpers: client configs for the broker under test, topic creation, reading back. */
final class Support {
    private Support() {}

    static String bootstrap() {
        String b = System.getProperty("compat.bootstrap");
        if (b == null || b.isEmpty()) b = System.getenv().getOrDefault("COMPAT_BOOTSTRAP", "127.0.0.1:9092");
        return b;
    }

    static String topicName(String what) {
        return "compat-java-" + what + "-" + UUID.randomUUID().toString().substring(0, 8);
    }

    static Properties adminProps() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        return p;
    }

    static Properties producerProps() {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30000);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 20000);
        return p;
    }

    /** Consumer with no group.id: only assign()/seek() are possible. */
    static Properties consumerProps() {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        return p;
    }

    static void createTopic(String topic, int partitions) throws Exception {
        try (Admin admin = Admin.create(adminProps())) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1)))
                    .all().get(30, TimeUnit.SECONDS);
            // wait until metadata shows every partition with a leader
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (true) {
                try {
                    var d = admin.describeTopics(Set.of(topic)).allTopicNames().get(10, TimeUnit.SECONDS).get(topic);
                    if (d.partitions().size() == partitions
                            && d.partitions().stream().allMatch(pi -> pi.leader() != null && !pi.leader().isEmpty())) {
                        return;
                    }
                } catch (Exception e) {
                    if (System.nanoTime() > deadline) throw e;
                }
                if (System.nanoTime() > deadline) throw new AssertionError("topic " + topic + " never got leaders");
                Thread.sleep(200);
            }
        }
    }

    static void deleteTopicQuietly(String topic) {
        try (Admin admin = Admin.create(adminProps())) {
            admin.deleteTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
        } catch (Exception ignored) {
            // cleanup only
        }
    }

    /** Reads exactly {@code expected} records from one partition from the beginning, using assign(). */
    static List<ConsumerRecord<byte[], byte[]>> readAll(TopicPartition tp, int expected, Map<String, Object> extra)
            throws Exception {
        Properties p = consumerProps();
        if (extra != null) p.putAll(extra);
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (out.size() < expected && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) out.add(r);
            }
            // one more short poll to catch records that should not be there
            if (out.size() == expected) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(300))) out.add(r);
            }
        }
        return out;
    }
}
