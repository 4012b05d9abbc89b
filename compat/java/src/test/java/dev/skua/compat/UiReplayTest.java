package dev.skua.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ConsumerGroupState;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.SecurityDisabledException;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The admin calls the management UIs make when they open a cluster and its pages
 * (kafbat kafka-ui's ReactiveAdminClient, AKHQ, Kafdrop, Redpanda Console), replayed with
 * the AdminClient, each checked for the shape the UI reads. One topic with records from
 * an idempotent producer and one consumer group with a commit are made first.
 */
@ExtendWith(CaseReporter.class)
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class UiReplayTest {
    private static final String TOPIC = Support.topicName("ui");
    private static final String GROUP = Support.topicName("ui-group");
    private static final int RECORDS = 3;

    private static <T> T get(org.apache.kafka.common.KafkaFuture<T> f) throws Exception {
        return f.get(30, TimeUnit.SECONDS);
    }

    @BeforeAll
    static void topicRecordsAndGroup() throws Exception {
        Support.createTopic(TOPIC, 2);
        var props = Support.producerProps();
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        try (var producer = new KafkaProducer<byte[], byte[]>(props)) {
            for (int i = 0; i < RECORDS; i++) {
                producer.send(new ProducerRecord<>(TOPIC, 0, null, ("v" + i).getBytes(StandardCharsets.UTF_8))).get();
            }
        }
        var cprops = Support.consumerProps();
        cprops.put(ConsumerConfig.GROUP_ID_CONFIG, GROUP);
        try (var consumer = new KafkaConsumer<byte[], byte[]>(cprops)) {
            consumer.subscribe(List.of(TOPIC));
            int read = 0;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(40);
            while (read < RECORDS && System.nanoTime() < deadline) {
                read += consumer.poll(Duration.ofMillis(500)).count();
            }
            assertEquals(RECORDS, read, "the group read every record");
            consumer.commitSync();
        }
    }

    @AfterAll
    static void cleanUp() {
        Support.deleteTopicQuietly(TOPIC);
    }

    /**
     * kafka-ui's first calls (ConfigRelatedInfo.extract): DescribeCluster, then the
     * controller's broker configs, where it reads inter.broker.protocol.version for the
     * cluster's version (and so which features to use) and delete.topic.enable; AKHQ's
     * node page reads the same configs.
     */
    @Test @DisplayName("java.ui.cluster_and_version")
    void clusterAndVersion() throws Exception {
        try (Admin admin = Admin.create(Support.adminProps())) {
            var cluster = admin.describeCluster(new DescribeClusterOptions().includeAuthorizedOperations(true));
            var nodes = get(cluster.nodes());
            assertFalse(nodes.isEmpty());
            assertNotNull(get(cluster.clusterId()));
            assertNotNull(get(cluster.authorizedOperations()), "asked for, so reported");
            Node controller = get(cluster.controller());
            int target = controller != null ? controller.id() : nodes.iterator().next().id();
            var resource = new ConfigResource(ConfigResource.Type.BROKER, Integer.toString(target));
            Config config = get(admin.describeConfigs(List.of(resource)).all()).get(resource);
            assertEquals("true", config.get("delete.topic.enable").value());
            ConfigEntry ibp = config.get("inter.broker.protocol.version");
            ConfigEntry zk = config.get("zookeeper.connect");
            if (ibp == null) {
                // Kafka 4 has no such key, nor has skua alone (it answers as Kafka 4):
                // kafka-ui then takes the version as unknown. A ZooKeeper-mode broker
                // (Kafka 3.9's) must have it.
                assertTrue(zk == null || zk.value() == null || zk.value().isEmpty(),
                        "a ZooKeeper-mode broker describes inter.broker.protocol.version");
                return;
            }
            // kafka-ui's KafkaVersion.parse: the leading major.minor as a number.
            var version = java.util.regex.Pattern.compile("^(\\d+)\\.(\\d+)").matcher(ibp.value());
            assertTrue(version.find(), "a version: " + ibp.value());
            float v = Float.parseFloat(version.group(1) + "." + version.group(2));
            assertTrue(v >= 2.6f, "new enough for every kafka-ui feature: " + ibp.value());
        }
    }

    /** The topic list and a topic's page: names, partitions, configs with documentation,
     *  first and last offsets, and (kafka-ui's producers tab) DescribeProducers. */
    @Test @DisplayName("java.ui.topics")
    void topics() throws Exception {
        try (Admin admin = Admin.create(Support.adminProps())) {
            Set<String> names = get(admin.listTopics(new ListTopicsOptions().listInternal(true)).names());
            assertTrue(names.contains(TOPIC));
            assertTrue(names.contains("__consumer_offsets"), "internal topics are listed when asked");
            TopicDescription d = get(admin.describeTopics(List.of(TOPIC)).topicNameValues().get(TOPIC));
            assertEquals(2, d.partitions().size());
            var resource = new ConfigResource(ConfigResource.Type.TOPIC, TOPIC);
            Config config = get(admin.describeConfigs(List.of(resource),
                    new DescribeConfigsOptions().includeSynonyms(true).includeDocumentation(true)).all()).get(resource);
            ConfigEntry retention = config.get("retention.ms");
            assertNotNull(retention);
            assertNotNull(retention.documentation());
            assertFalse(retention.documentation().isEmpty());
            // The broker key it falls back to (retention.ms has none listed: Kafka drops
            // them as log.retention.ms itself is unset).
            assertEquals("log.segment.bytes", config.get("segment.bytes").synonyms().get(0).name());
            var p0 = new TopicPartition(TOPIC, 0);
            var earliest = get(admin.listOffsets(Map.of(p0, OffsetSpec.earliest())).all()).get(p0);
            var latest = get(admin.listOffsets(Map.of(p0, OffsetSpec.latest())).all()).get(p0);
            assertEquals(0, earliest.offset());
            assertEquals(RECORDS, latest.offset());
            List<ProducerState> producers = get(admin.describeProducers(List.of(p0)).partitionResult(p0))
                    .activeProducers();
            assertEquals(1, producers.size(), "the idempotent producer: " + producers);
            assertTrue(producers.get(0).producerId() >= 0);
            assertEquals(RECORDS - 1, producers.get(0).lastSequence());
        }
    }

    /** The brokers page: each broker's log dirs with the size of each replica. */
    @Test @DisplayName("java.ui.log_dirs")
    void logDirs() throws Exception {
        try (Admin admin = Admin.create(Support.adminProps())) {
            List<Integer> ids = get(admin.describeCluster().nodes()).stream().map(Node::id).collect(Collectors.toList());
            Map<Integer, Map<String, LogDirDescription>> dirs = get(admin.describeLogDirs(ids).allDescriptions());
            long size = -1;
            for (var perBroker : dirs.values()) {
                assertFalse(perBroker.isEmpty(), "a broker with no log dir: " + dirs);
                for (LogDirDescription dir : perBroker.values()) {
                    assertEquals(null, dir.error(), "log dir in error");
                    var replica = dir.replicaInfos().get(new TopicPartition(TOPIC, 0));
                    if (replica != null) size = Math.max(size, replica.size());
                }
            }
            assertTrue(size > 0, "the topic's replica has bytes: " + size);
        }
    }

    /** The consumers page: groups listed, described, their offsets and lag. */
    @Test @DisplayName("java.ui.groups")
    void groups() throws Exception {
        try (Admin admin = Admin.create(Support.adminProps())) {
            var listed = get(admin.listConsumerGroups().all());
            assertTrue(listed.stream().anyMatch(g -> g.groupId().equals(GROUP)), "listed: " + listed);
            ConsumerGroupDescription d = get(admin.describeConsumerGroups(List.of(GROUP)).all()).get(GROUP);
            assertEquals(ConsumerGroupState.EMPTY, d.state());
            assertNotNull(d.coordinator());
            Map<TopicPartition, OffsetAndMetadata> offsets =
                    get(admin.listConsumerGroupOffsets(GROUP).partitionsToOffsetAndMetadata());
            var p0 = new TopicPartition(TOPIC, 0);
            assertEquals(RECORDS, offsets.get(p0).offset());
            Map<TopicPartition, OffsetSpec> ends = new HashMap<>();
            offsets.keySet().forEach(tp -> ends.put(tp, OffsetSpec.latest()));
            var latest = get(admin.listOffsets(ends).all());
            assertEquals(0, latest.get(p0).offset() - offsets.get(p0).offset(), "no lag");
        }
    }

    /** kafka-ui's isAuthorizedSecurityEnabled and AKHQ's ACL page: without an authorizer
     *  Kafka answers SECURITY_DISABLED. */
    @Test @DisplayName("java.ui.describe_acls")
    void describeAcls() throws Exception {
        try (Admin admin = Admin.create(Support.adminProps())) {
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> get(admin.describeAcls(AclBindingFilter.ANY).values()));
            assertTrue(e.getCause() instanceof SecurityDisabledException, "got " + e.getCause());
        }
    }

    /** kafka-ui's and Redpanda Console's quotas page. */
    @Test @DisplayName("java.ui.describe_client_quotas")
    void describeClientQuotas() throws Exception {
        try (Admin admin = Admin.create(Support.adminProps())) {
            var quotas = get(admin.describeClientQuotas(ClientQuotaFilter.all()).entities());
            assertNotNull(quotas);
        }
    }
}
