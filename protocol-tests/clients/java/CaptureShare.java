// Drives Apache Kafka's KafkaShareConsumer (kafka-clients 4.4) through the share group APIs
// skua serves, for capture.py: ShareGroupHeartbeat, ShareFetch (acknowledgements riding
// on it too), ShareAcknowledge, ShareGroupDescribe.
//
//   java -cp 'kafka-4.4.0/libs/*' CaptureShare.java HOST:PORT
// One member at a time (see README.md): records are produced before it joins, its group
// reads from the earliest offset, it releases half of them and accepts the rest, takes the
// released ones again and accepts them on its next fetch, then leaves. Topics are prefixed
// `share-` so the fixtures replay independently of other clients'.

import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.*;

public class CaptureShare {
    public static void main(String[] args) throws Exception {
        String b = args[0];
        String topic = "share-a", group = "share-capture";
        Properties ap = new Properties();
        ap.put("bootstrap.servers", b);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            AlterConfigOp earliest = new AlterConfigOp(
                new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET);
            admin.incrementalAlterConfigs(Map.of(
                new ConfigResource(ConfigResource.Type.GROUP, group), List.of(earliest))).all().get();
        }
        // One batch, so one Produce frame (the proxy keeps three per version).
        Properties pp = new Properties();
        pp.put("bootstrap.servers", b);
        pp.put("linger.ms", "1000");
        try (Producer<String, String> p = new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < 10; i++) {
                p.send(new ProducerRecord<>(topic, 0, 1_700_000_000_000L + i, "k" + i, "value-" + i));
            }
            p.flush();
        }
        Properties cp = new Properties();
        cp.put("bootstrap.servers", b);
        cp.put("group.id", group);
        cp.put("share.acknowledgement.mode", "explicit");
        try (KafkaShareConsumer<String, String> c =
                 new KafkaShareConsumer<>(cp, new StringDeserializer(), new StringDeserializer())) {
            c.subscribe(List.of(topic));
            List<ConsumerRecord<String, String>> got = poll(c, 10);
            for (ConsumerRecord<String, String> r : got) {
                c.acknowledge(r, r.offset() < 5 ? AcknowledgeType.ACCEPT : AcknowledgeType.RELEASE);
            }
            System.out.println("acknowledged: " + c.commitSync());
            List<ConsumerRecord<String, String>> again = poll(c, 5);
            for (ConsumerRecord<String, String> r : again) {
                System.out.println("again " + r.offset() + " delivery " + r.deliveryCount());
                c.acknowledge(r, AcknowledgeType.ACCEPT);
            }
            // The acceptance rides on this fetch.
            c.poll(Duration.ofMillis(500));
        }
        try (Admin admin = Admin.create(ap)) {
            System.out.println(admin.describeShareGroups(List.of(group)).all().get());
        }
    }

    static List<ConsumerRecord<String, String>> poll(KafkaShareConsumer<String, String> c, int n) {
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 30_000;
        while (out.size() < n && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) out.add(r);
        }
        if (out.size() < n) throw new IllegalStateException("got " + out.size() + " of " + n);
        return out;
    }
}
