// Drives the Apache Kafka Java clients through the APIs skua serves, for capture.py.
//
//   javac -cp 'kafka-4.1.2/libs/*' Capture.java && java -cp 'kafka-4.1.2/libs/*:.' Capture HOST:PORT [delete]
// Topics are prefixed `java-` so each client's fixtures replay independently.

import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.*;

public class Capture {
    public static void main(String[] args) throws Exception {
        String b = args[0];
        Properties ap = new Properties();
        ap.put("bootstrap.servers", b);
        if (args.length > 1 && args[1].equals("delete")) {
            // Run after `TopicCommand --describe` (DescribeTopicPartitions), see capture-all.sh.
            try (Admin admin = Admin.create(ap)) {
                admin.deleteTopics(List.of("java-b")).all().get();
            }
            return;
        }
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic("java-a", 2, (short) 1),
                    new NewTopic("java-b", 1, (short) 1))).all().get();
            System.out.println(admin.describeTopics(List.of("java-a", "java-b")).allTopicNames().get());
            System.out.println(admin.describeCluster().nodes().get());

            Properties pp = new Properties();
            pp.put("bootstrap.servers", b);
            pp.put("enable.idempotence", "true");
            pp.put("compression.type", "zstd");
            pp.put("linger.ms", "5");
            try (Producer<String, String> p = new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer())) {
                for (int i = 0; i < 20; i++) {
                    p.send(new ProducerRecord<>("java-a", i % 2, 1_700_000_000_000L + i, "k" + i, "value-" + i));
                }
                p.flush();
            }
            Properties cp = new Properties();
            cp.put("bootstrap.servers", b);
            cp.put("fetch.max.wait.ms", "100");
            try (Consumer<String, String> c = new KafkaConsumer<>(cp, new StringDeserializer(), new StringDeserializer())) {
                TopicPartition tp = new TopicPartition("java-a", 0);
                c.assign(List.of(tp));
                c.seekToBeginning(List.of(tp));
                int got = 0;
                long deadline = System.currentTimeMillis() + 20_000;
                while (got < 10 && System.currentTimeMillis() < deadline) {
                    got += c.poll(Duration.ofMillis(500)).count();
                }
                System.out.println("consumed " + got);
                System.out.println(c.offsetsForTimes(Map.of(tp, 1_700_000_000_004L)));
                System.out.println(c.endOffsets(List.of(tp)));
            }
            TopicPartition tp = new TopicPartition("java-a", 1);
            for (OffsetSpec spec : List.of(OffsetSpec.earliest(), OffsetSpec.latest(), OffsetSpec.maxTimestamp())) {
                System.out.println(admin.listOffsets(Map.of(tp, spec)).all().get());
            }
            System.out.println(admin.describeConfigs(List.of(
                    new ConfigResource(ConfigResource.Type.TOPIC, "java-a"),
                    new ConfigResource(ConfigResource.Type.BROKER, "1"))).all().get().size());
            admin.createPartitions(Map.of("java-b", NewPartitions.increaseTo(3))).all().get();
            System.out.println(admin.describeTopics(List.of("java-b")).allTopicNames().get());
            groups(b, admin);
        }
        System.out.println("done");
    }

    /** Subscribes in `group`, reads java-a (20 records), commits them and leaves on close. */
    static void consumeInGroup(String b, String group, String protocol, String instanceId) {
        Properties cp = new Properties();
        cp.put("bootstrap.servers", b);
        cp.put("group.id", group);
        cp.put("group.protocol", protocol);
        cp.put("enable.auto.commit", "false");
        cp.put("auto.offset.reset", "earliest");
        cp.put("fetch.max.wait.ms", "100");
        if (instanceId != null) cp.put("group.instance.id", instanceId);
        try (Consumer<String, String> c = new KafkaConsumer<>(cp, new StringDeserializer(), new StringDeserializer())) {
            c.subscribe(List.of("java-a"));
            int got = 0;
            long deadline = System.currentTimeMillis() + 20_000;
            while (got < 20 && System.currentTimeMillis() < deadline) {
                got += c.poll(Duration.ofMillis(500)).count();
            }
            c.commitSync();
            System.out.println(group + " (" + protocol + ") consumed " + got + ", committed " + c.committed(c.assignment()));
        }
    }

    /**
     * The group APIs. Each group has one member at a time: the replay sends a client's
     * frames on one connection in capture order, so a JoinGroup must never wait for a
     * member whose frames come later.
     */
    static void groups(String b, Admin admin) throws Exception {
        // Classic protocol: FindCoordinator v6, JoinGroup v9, SyncGroup v5, Heartbeat v4,
        // OffsetFetch v9, OffsetCommit v9, LeaveGroup v5.
        consumeInGroup(b, "java-g", "classic", null);
        // Static membership (group.instance.id): no LeaveGroup on close; the admin removes it.
        consumeInGroup(b, "java-gs", "classic", "java-static");
        admin.removeMembersFromConsumerGroup("java-gs", new RemoveMembersFromConsumerGroupOptions()).all().get();
        // KIP-848: ConsumerGroupHeartbeat v1.
        consumeInGroup(b, "java-g848", "consumer", null);
        System.out.println(admin.listGroups().all().get());
        // ConsumerGroupDescribe v1 for the KIP-848 group, DescribeGroups v6 for the classic ones.
        System.out.println(admin.describeConsumerGroups(List.of("java-g", "java-g848")).all().get());
        System.out.println(admin.listConsumerGroupOffsets("java-g").partitionsToOffsetAndMetadata().get());
        admin.deleteConsumerGroupOffsets("java-g", Set.of(new TopicPartition("java-a", 1))).all().get();
        admin.deleteConsumerGroups(List.of("java-g", "java-gs", "java-g848")).all().get();
        ConfigResource topic = new ConfigResource(ConfigResource.Type.TOPIC, "java-a");
        admin.incrementalAlterConfigs(Map.of(topic, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "3600000"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("cleanup.policy", ""), AlterConfigOp.OpType.DELETE)))).all().get();
        System.out.println(admin.describeConfigs(List.of(topic)).all().get());
    }
}
