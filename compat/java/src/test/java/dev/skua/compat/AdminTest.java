package dev.skua.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/** AdminClient cases: topics, offsets, configs, cluster. */
@ExtendWith(CaseReporter.class)
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class AdminTest {

    private static <T> T get(org.apache.kafka.common.KafkaFuture<T> f) throws Exception {
        return f.get(30, TimeUnit.SECONDS);
    }

    @Test @DisplayName("java.admin.create_topics")
    void createTopics() throws Exception {
        String t1 = Support.topicName("adm-create-a"), t2 = Support.topicName("adm-create-b");
        try (Admin admin = Admin.create(Support.adminProps())) {
            var res = admin.createTopics(List.of(new NewTopic(t1, 3, (short) 1), new NewTopic(t2, 1, (short) 1)));
            get(res.all());
            assertEquals(3, get(res.numPartitions(t1)));
            assertEquals(1, get(res.replicationFactor(t1)));
            assertNotNull(get(res.topicId(t1)));
            // creating it again must fail with TopicExistsException
            ExecutionException e = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class,
                    () -> get(admin.createTopics(List.of(new NewTopic(t1, 3, (short) 1))).all()));
            assertTrue(e.getCause() instanceof TopicExistsException, "got " + e.getCause());
            Set<String> names = get(admin.listTopics().names());
            assertTrue(names.contains(t1) && names.contains(t2), "listTopics shows both");
        } finally {
            Support.deleteTopicQuietly(t1);
            Support.deleteTopicQuietly(t2);
        }
    }

    @Test @DisplayName("java.admin.describe_topics")
    void describeTopics() throws Exception {
        String t = Support.topicName("adm-describe");
        Support.createTopic(t, 4);
        try (Admin admin = Admin.create(Support.adminProps())) {
            TopicDescription d = get(admin.describeTopics(Set.of(t)).allTopicNames()).get(t);
            assertEquals(t, d.name());
            assertFalse(d.isInternal());
            assertNotNull(d.topicId());
            assertEquals(4, d.partitions().size());
            var nodes = get(admin.describeCluster().nodes());
            for (int i = 0; i < 4; i++) {
                TopicPartitionInfo pi = d.partitions().get(i);
                assertEquals(i, pi.partition());
                assertNotNull(pi.leader(), "leader of partition " + i);
                assertTrue(nodes.stream().anyMatch(n -> n.id() == pi.leader().id()), "leader is a cluster node");
                assertEquals(1, pi.replicas().size(), "replicas");
                assertEquals(pi.leader().id(), pi.replicas().get(0).id());
                assertEquals(1, pi.isr().size(), "isr");
                assertEquals(pi.leader().id(), pi.isr().get(0).id());
            }
        } finally {
            Support.deleteTopicQuietly(t);
        }
    }

    @Test @DisplayName("java.admin.describe_cluster")
    void describeCluster() throws Exception {
        try (Admin admin = Admin.create(Support.adminProps())) {
            var c = admin.describeCluster();
            var nodes = get(c.nodes());
            assertFalse(nodes.isEmpty());
            assertNotNull(get(c.controller()));
            String id = get(c.clusterId());
            assertNotNull(id);
            assertFalse(id.isEmpty());
            String bootstrap = Support.bootstrap();
            assertTrue(nodes.stream().anyMatch(n -> bootstrap.endsWith(":" + n.port())),
                    "advertised port matches bootstrap: " + nodes);
        }
    }

    /** No authorizer: every operation an ACL can name for the resource type is allowed. */
    @Test @DisplayName("java.admin.authorized_operations")
    void authorizedOperations() throws Exception {
        String t = Support.topicName("adm-authops");
        String group = Support.topicName("adm-authops-group");
        Support.createTopic(t, 1);
        try (Admin admin = Admin.create(Support.adminProps())) {
            var cluster = get(admin.describeCluster(
                    new org.apache.kafka.clients.admin.DescribeClusterOptions().includeAuthorizedOperations(true))
                    .authorizedOperations());
            assertEquals(Set.of(AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                    AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                    AclOperation.DESCRIBE), cluster);
            var topic = get(admin.describeTopics(Set.of(t),
                    new org.apache.kafka.clients.admin.DescribeTopicsOptions().includeAuthorizedOperations(true))
                    .allTopicNames()).get(t).authorizedOperations();
            assertEquals(Set.of(AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                    AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                    AclOperation.ALTER_CONFIGS), topic);
            get(admin.alterConsumerGroupOffsets(group, Map.of(new TopicPartition(t, 0),
                    new org.apache.kafka.clients.consumer.OffsetAndMetadata(0))).all());
            var described = get(admin.describeConsumerGroups(List.of(group),
                    new org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions().includeAuthorizedOperations(true))
                    .all()).get(group).authorizedOperations();
            assertEquals(Set.of(AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
                    AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS), described);
            // Not asked: the client reports none.
            assertEquals(null, get(admin.describeCluster().authorizedOperations()));
        } finally {
            Support.deleteTopicQuietly(t);
        }
    }

    @Test @DisplayName("java.admin.list_offsets")
    void listOffsets() throws Exception {
        String t = Support.topicName("adm-offsets");
        Support.createTopic(t, 1);
        TopicPartition tp = new TopicPartition(t, 0);
        long base = 1_600_000_000_000L;
        try (Admin admin = Admin.create(Support.adminProps())) {
            // empty partition: earliest = latest = 0
            assertEquals(0, get(admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp)).offset());
            assertEquals(0, get(admin.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp)).offset());
            try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(Support.producerProps())) {
                for (int i = 0; i < 10; i++) {
                    p.send(new ProducerRecord<>(t, 0, base + i * 1000L, null,
                            ("v" + i).getBytes(StandardCharsets.UTF_8))).get(30, TimeUnit.SECONDS);
                }
            }
            assertEquals(0, get(admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp)).offset());
            assertEquals(10, get(admin.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp)).offset());
            // first offset whose timestamp >= the given one
            ListOffsetsResult.ListOffsetsResultInfo r =
                    get(admin.listOffsets(Map.of(tp, OffsetSpec.forTimestamp(base + 3500))).partitionResult(tp));
            assertEquals(4, r.offset());
            assertEquals(base + 4000, r.timestamp());
            r = get(admin.listOffsets(Map.of(tp, OffsetSpec.forTimestamp(base))).partitionResult(tp));
            assertEquals(0, r.offset());
            // a timestamp after every record: no offset (-1)
            r = get(admin.listOffsets(Map.of(tp, OffsetSpec.forTimestamp(base + 999_999))).partitionResult(tp));
            assertEquals(-1, r.offset());
            // max timestamp (KIP-734)
            r = get(admin.listOffsets(Map.of(tp, OffsetSpec.maxTimestamp())).partitionResult(tp));
            assertEquals(9, r.offset());
            assertEquals(base + 9000, r.timestamp());
        } finally {
            Support.deleteTopicQuietly(t);
        }
    }

    @Test @DisplayName("java.admin.max_timestamp_in_a_batch")
    void maxTimestampInABatch() throws Exception {
        // KAFKA-16310 (Kafka 3.8+): OffsetSpec.maxTimestamp() names the record with the largest
        // timestamp, which inside one batch need not be the last; also in a compressed batch.
        // Current timestamps: Kafka's retention check would delete older ones mid-case.
        long base = System.currentTimeMillis() - 60_000;
        for (String codec : List.of("none", "zstd")) {
            String t = Support.topicName("adm-maxts-" + codec);
            Support.createTopic(t, 1);
            TopicPartition tp = new TopicPartition(t, 0);
            Properties props = Support.producerProps();
            // Held back until flush(), so the three records share one batch.
            props.put(ProducerConfig.LINGER_MS_CONFIG, 10_000);
            props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 60_000);
            props.put(ProducerConfig.BATCH_SIZE_CONFIG, 1 << 20);
            props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
            try (Admin admin = Admin.create(Support.adminProps());
                 KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(props)) {
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (long delta : new long[] {0, 10, 5}) {
                    sent.add(p.send(new ProducerRecord<>(t, 0, base + delta, null,
                            ("v" + delta).getBytes(StandardCharsets.UTF_8))));
                }
                p.flush();
                for (int i = 0; i < sent.size(); i++) {
                    assertEquals(i, sent.get(i).get(30, TimeUnit.SECONDS).offset(), "one batch, in order");
                }
                ListOffsetsResult.ListOffsetsResultInfo r =
                        get(admin.listOffsets(Map.of(tp, OffsetSpec.maxTimestamp())).partitionResult(tp));
                assertEquals(1, r.offset(), codec);
                assertEquals(base + 10, r.timestamp(), codec);
                r = get(admin.listOffsets(Map.of(tp, OffsetSpec.forTimestamp(base + 6))).partitionResult(tp));
                assertEquals(1, r.offset(), codec);
            } finally {
                Support.deleteTopicQuietly(t);
            }
        }
    }

    @Test @DisplayName("java.admin.create_partitions")
    void createPartitions() throws Exception {
        String t = Support.topicName("adm-parts");
        Support.createTopic(t, 2);
        try (Admin admin = Admin.create(Support.adminProps())) {
            get(admin.createPartitions(Map.of(t, NewPartitions.increaseTo(5))).all());
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            int n = 0;
            while (System.nanoTime() < deadline) {
                n = get(admin.describeTopics(Set.of(t)).allTopicNames()).get(t).partitions().size();
                if (n == 5) break;
                Thread.sleep(200);
            }
            assertEquals(5, n);
        } finally {
            Support.deleteTopicQuietly(t);
        }
    }

    @Test @DisplayName("java.admin.describe_configs")
    void describeConfigs() throws Exception {
        String t = Support.topicName("adm-configs");
        try (Admin admin = Admin.create(Support.adminProps())) {
            get(admin.createTopics(List.of(new NewTopic(t, 1, (short) 1)
                    .configs(Map.of("retention.ms", "3600000", "cleanup.policy", "delete")))).all());
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, t);
            Config cfg = get(admin.describeConfigs(List.of(res)).all()).get(res);
            assertEquals("3600000", cfg.get("retention.ms").value());
            assertEquals("delete", cfg.get("cleanup.policy").value());
            assertNotNull(cfg.get("max.message.bytes"), "defaults are listed too");
        } finally {
            Support.deleteTopicQuietly(t);
        }
    }

    @Test @DisplayName("java.admin.alter_configs")
    void alterConfigs() throws Exception {
        String t = Support.topicName("adm-alter");
        Support.createTopic(t, 1);
        try (Admin admin = Admin.create(Support.adminProps())) {
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, t);
            get(admin.incrementalAlterConfigs(Map.of(res, List.of(new org.apache.kafka.clients.admin.AlterConfigOp(
                    new org.apache.kafka.clients.admin.ConfigEntry("retention.ms", "7200000"),
                    org.apache.kafka.clients.admin.AlterConfigOp.OpType.SET)))).all());
            Config cfg = get(admin.describeConfigs(List.of(res)).all()).get(res);
            assertEquals("7200000", cfg.get("retention.ms").value());
        } finally {
            Support.deleteTopicQuietly(t);
        }
    }

    @Test @DisplayName("java.admin.acls")
    void acls() throws Exception {
        String t = Support.topicName("adm-acl");
        var pattern = new org.apache.kafka.common.resource.ResourcePattern(
                org.apache.kafka.common.resource.ResourceType.TOPIC, t,
                org.apache.kafka.common.resource.PatternType.LITERAL);
        var binding = new org.apache.kafka.common.acl.AclBinding(pattern,
                new org.apache.kafka.common.acl.AccessControlEntry("User:compat-alice", "*",
                        org.apache.kafka.common.acl.AclOperation.READ,
                        org.apache.kafka.common.acl.AclPermissionType.ALLOW));
        try (Admin admin = Admin.create(Support.adminProps())) {
            get(admin.createAcls(List.of(binding)).all());
            var filter = new org.apache.kafka.common.acl.AclBindingFilter(pattern.toFilter(),
                    org.apache.kafka.common.acl.AccessControlEntryFilter.ANY);
            java.util.Collection<org.apache.kafka.common.acl.AclBinding> found = List.of();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (System.nanoTime() < deadline) {
                found = get(admin.describeAcls(filter).values());
                if (found.contains(binding)) break;
                Thread.sleep(200);
            }
            assertTrue(found.contains(binding), "describeAcls shows the new ACL: " + found);
            assertEquals(1, get(admin.deleteAcls(List.of(filter)).all()).size(), "deleteAcls removes it");
        }
    }

    @Test @DisplayName("java.admin.delete_topics")
    void deleteTopics() throws Exception {
        String t = Support.topicName("adm-delete");
        Support.createTopic(t, 2);
        try (Admin admin = Admin.create(Support.adminProps())) {
            get(admin.deleteTopics(List.of(t)).all());
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (get(admin.listTopics().names()).contains(t)) {
                assertTrue(System.nanoTime() < deadline, "topic still listed after delete");
                Thread.sleep(200);
            }
            // deleting a missing topic fails with UnknownTopicOrPartitionException
            ExecutionException e = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class,
                    () -> get(admin.deleteTopics(List.of(t)).all()));
            assertTrue(e.getCause() instanceof UnknownTopicOrPartitionException, "got " + e.getCause());
        }
    }
}
