package dev.skua.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/** Consumer-group cases: subscribe(), commits, the classic and the KIP-848 protocol. */
@ExtendWith(CaseReporter.class)
// short limits: these cases are xfail against skua for now and must fail fast
@Timeout(value = 45, unit = TimeUnit.SECONDS)
class GroupTest {

    private static void produce(String topic, int partitions, int n) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(Support.producerProps())) {
            for (int i = 0; i < n; i++) {
                p.send(new ProducerRecord<>(topic, i % partitions, null, ("v" + i).getBytes(StandardCharsets.UTF_8)));
            }
            p.flush();
        }
    }

    private void subscribeAndCommit(String protocol) throws Exception {
        String topic = Support.topicName("grp-" + protocol);
        String group = "compat-java-group-" + UUID.randomUUID();
        Support.createTopic(topic, 3);
        try {
            produce(topic, 3, 90);
            Properties p = Support.consumerProps();
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
            Set<String> seen = new HashSet<>();
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
                c.subscribe(List.of(topic));
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(25);
                while (seen.size() < 90 && System.nanoTime() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                        seen.add(new String(r.value(), StandardCharsets.UTF_8));
                    }
                }
                assertEquals(90, seen.size(), "records consumed via the group");
                c.commitSync(Duration.ofSeconds(30));
                Set<TopicPartition> tps = new HashSet<>();
                for (int i = 0; i < 3; i++) tps.add(new TopicPartition(topic, i));
                Map<TopicPartition, OffsetAndMetadata> committed = c.committed(tps, Duration.ofSeconds(30));
                for (TopicPartition tp : tps) {
                    assertNotNull(committed.get(tp), "committed offset for " + tp);
                    assertEquals(30, committed.get(tp).offset(), "committed offset for " + tp);
                }
            }
            // the group's offsets are visible to the admin API
            try (Admin admin = Admin.create(Support.adminProps())) {
                Map<TopicPartition, OffsetAndMetadata> offs = admin.listConsumerGroupOffsets(group)
                        .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
                assertEquals(3, offs.size());
                var groups = admin.listGroups().all().get(30, TimeUnit.SECONDS);
                assertTrue(groups.stream().anyMatch(g -> g.groupId().equals(group)), "listGroups shows the group");
            }
            // a new member of the same group resumes after the committed offsets
            produce(topic, 3, 3);
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
                c.subscribe(List.of(topic));
                List<String> more = new ArrayList<>();
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(25);
                while (more.size() < 3 && System.nanoTime() < deadline) {
                    c.poll(Duration.ofMillis(500)).forEach(r -> more.add(new String(r.value(), StandardCharsets.UTF_8)));
                }
                assertEquals(3, more.size(), "only the records after the commit: " + more);
            }
        } finally {
            Support.deleteTopicQuietly(topic);
        }
    }

    @Test @DisplayName("java.group.classic.subscribe_commit")
    void classicGroup() throws Exception {
        subscribeAndCommit("classic");
    }

    @Test @DisplayName("java.group.consumer.subscribe_commit")
    void consumerProtocolGroup() throws Exception {
        subscribeAndCommit("consumer");
    }

    @Test @DisplayName("java.group.assign_commit")
    void assignWithCommit() throws Exception {
        // manual assignment, but offsets stored in a group (OffsetCommit/OffsetFetch only, no membership)
        String topic = Support.topicName("grp-assign");
        String group = "compat-java-assign-" + UUID.randomUUID();
        Support.createTopic(topic, 1);
        try {
            produce(topic, 1, 20);
            TopicPartition tp = new TopicPartition(topic, 0);
            Properties p = Support.consumerProps();
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
                c.assign(List.of(tp));
                c.commitSync(Map.of(tp, new OffsetAndMetadata(12, "compat-meta")), Duration.ofSeconds(30));
            }
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
                c.assign(List.of(tp));
                OffsetAndMetadata om = c.committed(Set.of(tp), Duration.ofSeconds(30)).get(tp);
                assertNotNull(om);
                assertEquals(12, om.offset());
                assertEquals("compat-meta", om.metadata());
                List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (got.size() < 8 && System.nanoTime() < deadline) c.poll(Duration.ofMillis(300)).forEach(got::add);
                assertEquals(8, got.size());
                assertEquals(12, got.get(0).offset(), "resumed from the committed offset");
            }
        } finally {
            Support.deleteTopicQuietly(topic);
        }
    }

    /**
     * Three members over six partitions get two each; when one leaves, the other two take
     * its partitions (three each) and keep consuming from the committed offsets.
     */
    private void threeMembersThenTwo(String protocol) throws Exception {
        String topic = Support.topicName("grp3-" + protocol);
        String group = "compat-java-three-" + UUID.randomUUID();
        Support.createTopic(topic, 6);
        List<KafkaConsumer<byte[], byte[]>> members = new ArrayList<>();
        try {
            produce(topic, 6, 60);
            Properties p = Support.consumerProps();
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
            for (int i = 0; i < 3; i++) {
                KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p);
                c.subscribe(List.of(topic));
                members.add(c);
            }
            // (partition, offset): the second round of records repeats the first one's values
            Set<String> seen = new HashSet<>();
            List<Integer> sizes = List.of();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(25);
            while (System.nanoTime() < deadline) {
                for (KafkaConsumer<byte[], byte[]> c : members) {
                    c.poll(Duration.ofMillis(100)).forEach(r -> seen.add(r.partition() + ":" + r.offset()));
                }
                sizes = members.stream().map(c -> c.assignment().size()).sorted().toList();
                if (sizes.equals(List.of(2, 2, 2)) && seen.size() == 60) break;
            }
            assertEquals(List.of(2, 2, 2), sizes, "two partitions per member");
            assertEquals(60, seen.size(), "every record consumed once by the group");
            for (KafkaConsumer<byte[], byte[]> c : members) c.commitSync(Duration.ofSeconds(30));
            members.remove(0).close(Duration.ofSeconds(10));
            produce(topic, 6, 60);
            deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(25);
            while (System.nanoTime() < deadline) {
                for (KafkaConsumer<byte[], byte[]> c : members) {
                    c.poll(Duration.ofMillis(100)).forEach(r -> seen.add(r.partition() + ":" + r.offset()));
                }
                sizes = members.stream().map(c -> c.assignment().size()).sorted().toList();
                if (sizes.equals(List.of(3, 3)) && seen.size() == 120) break;
            }
            assertEquals(List.of(3, 3), sizes, "the leaver's partitions move to the others");
            assertEquals(120, seen.size(), "the survivors consume everything produced after the change");
        } finally {
            for (KafkaConsumer<byte[], byte[]> c : members) c.close(Duration.ofSeconds(5));
            Support.deleteTopicQuietly(topic);
        }
    }

    @Test @DisplayName("java.group.classic.three_members")
    void threeMembersClassic() throws Exception {
        threeMembersThenTwo("classic");
    }

    @Test @DisplayName("java.group.consumer.three_members")
    void threeMembersConsumerProtocol() throws Exception {
        threeMembersThenTwo("consumer");
    }
}
