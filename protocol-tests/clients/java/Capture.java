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
        }
        System.out.println("done");
    }
}
