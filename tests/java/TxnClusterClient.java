// The Java (Kafka 3.9.1) transactional producer and read_committed consumer that
// tests/it/txn_cluster.rs drives against a three-broker cluster.
//
//   run BOOTSTRAP TOPIC TXN_ID N      N transactions, each one record per partition
//                                     ("TXN_ID:tI-pP"); even ones committed, odd aborted
//   hold BOOTSTRAP TOPIC TXN_ID       one transaction: records "held-pP" sent, then
//                                     "COORDINATOR <id>"; commits once a line arrives on
//                                     stdin, then "COMMITTED" (or "FAILED <why>")
//   consume BOOTSTRAP TOPIC           every value read_committed reads, one a line, up to
//                                     the partitions' last stable offsets, then "END"

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

public class TxnClusterClient {
    public static void main(String[] args) throws Exception {
        String mode = args[0], bootstrap = args[1], topic = args[2];
        switch (mode) {
            case "run" -> run(bootstrap, topic, args[3], Integer.parseInt(args[4]));
            case "hold" -> hold(bootstrap, topic, args[3]);
            case "consume" -> consume(bootstrap, topic);
            default -> throw new IllegalArgumentException(mode);
        }
    }

    static Producer<String, String> producer(String bootstrap, String txnId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", txnId);
        p.put("transaction.timeout.ms", "60000");
        p.put("max.block.ms", "50000");
        p.put("delivery.timeout.ms", "50000");
        return new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
    }

    static int partitions(Producer<String, String> p, String topic) {
        return p.partitionsFor(topic).size();
    }

    static void run(String bootstrap, String topic, String txnId, int n) throws Exception {
        try (Producer<String, String> p = producer(bootstrap, txnId)) {
            p.initTransactions();
            int count = partitions(p, topic);
            for (int i = 0; i < n; i++) {
                p.beginTransaction();
                for (int part = 0; part < count; part++) {
                    p.send(new ProducerRecord<>(topic, part, "k", txnId + ":t" + i + "-p" + part));
                }
                if (i % 2 == 0) p.commitTransaction(); else p.abortTransaction();
            }
        }
        System.out.println("done");
    }

    static void hold(String bootstrap, String topic, String txnId) throws Exception {
        Producer<String, String> p = producer(bootstrap, txnId);
        p.initTransactions();
        p.beginTransaction();
        int count = partitions(p, topic);
        for (int part = 0; part < count; part++) {
            p.send(new ProducerRecord<>(topic, part, "k", "held-p" + part)).get();
        }
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(ap)) {
            TransactionDescription d = admin.describeTransactions(List.of(txnId)).description(txnId).get();
            System.out.println("COORDINATOR " + d.coordinatorId());
        }
        System.out.flush();
        new BufferedReader(new InputStreamReader(System.in)).readLine();
        try {
            p.commitTransaction();
            System.out.println("COMMITTED");
        } catch (Exception e) {
            System.out.println("FAILED " + e);
        }
        p.close(Duration.ofSeconds(5));
    }

    static void consume(String bootstrap, String topic) {
        Properties cp = new Properties();
        cp.put("bootstrap.servers", bootstrap);
        cp.put("isolation.level", "read_committed");
        try (Consumer<String, String> c = new KafkaConsumer<>(cp, new StringDeserializer(), new StringDeserializer())) {
            List<TopicPartition> tps = new ArrayList<>();
            for (var info : c.partitionsFor(topic)) tps.add(new TopicPartition(topic, info.partition()));
            c.assign(tps);
            c.seekToBeginning(tps);
            // read_committed: the end offsets are the last stable offsets.
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            long deadline = System.currentTimeMillis() + 30_000;
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    System.out.println(r.value());
                }
                boolean done = true;
                for (TopicPartition tp : tps) done &= c.position(tp) >= end.get(tp);
                if (done) break;
            }
        }
        System.out.println("END");
    }
}
