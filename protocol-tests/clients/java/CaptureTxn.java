// Drives the Java transactional producer and a read_committed consumer, for capture.py:
// one transaction committed, one aborted, each with the group offset of a
// consume-transform-produce step.
//
//   javac -cp 'kafka-4.1.2/libs/*' CaptureTxn.java && java -cp 'kafka-4.1.2/libs/*:.' CaptureTxn HOST:PORT
// Its frames carry the producer ids the broker handed out, so they are captured and
// replayed on a broker of their own (see README.md). Topics are prefixed `javatxn-`.

import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

public class CaptureTxn {
    public static void main(String[] args) throws Exception {
        String b = args[0];
        Properties ap = new Properties();
        ap.put("bootstrap.servers", b);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic("javatxn-a", 1, (short) 1))).all().get();
        }
        Properties pp = new Properties();
        pp.put("bootstrap.servers", b);
        pp.put("transactional.id", "javatxn-id");
        try (Producer<String, String> p = new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer())) {
            p.initTransactions();
            for (boolean commit : new boolean[] {true, false}) {
                p.beginTransaction();
                for (int i = 0; i < 3; i++) p.send(new ProducerRecord<>("javatxn-a", 0, "k" + i, "v" + i)).get();
                // A consume-transform-produce step: the group's offset commits with the
                // transaction (AddOffsetsToTxn, TxnOffsetCommit).
                p.sendOffsetsToTransaction(Map.of(new TopicPartition("javatxn-a", 0), new OffsetAndMetadata(commit ? 3 : 6)),
                        new ConsumerGroupMetadata("javatxn-group"));
                if (commit) p.commitTransaction(); else p.abortTransaction();
            }
        }
        try (Admin admin = Admin.create(ap)) {
            System.out.println(admin.listTransactions().all().get());
            System.out.println(admin.describeTransactions(List.of("javatxn-id")).all().get());
            System.out.println(admin.describeProducers(List.of(new TopicPartition("javatxn-a", 0))).all().get());
            // OffsetFetch with require_stable: the committed transaction's offset, 3.
            System.out.println(admin.listConsumerGroupOffsets("javatxn-group",
                    new ListConsumerGroupOffsetsOptions().requireStable(true)).partitionsToOffsetAndMetadata().get());
        }
        // A transaction left open by a producer that goes away, ended by the admin as
        // `kafka-transactions.sh abort` does (DescribeProducers, then WriteTxnMarkers).
        Properties hp = new Properties();
        hp.put("bootstrap.servers", b);
        hp.put("transactional.id", "javatxn-hanging");
        hp.put("transaction.timeout.ms", "600000");
        Producer<String, String> hanging = new KafkaProducer<>(hp, new StringSerializer(), new StringSerializer());
        hanging.initTransactions();
        hanging.beginTransaction();
        hanging.send(new ProducerRecord<>("javatxn-a", 0, "h", "hanging")).get();
        TopicPartition tp0 = new TopicPartition("javatxn-a", 0);
        try (Admin admin = Admin.create(ap)) {
            for (var p : admin.describeProducers(List.of(tp0)).partitionResult(tp0).get().activeProducers()) {
                if (p.currentTransactionStartOffset().isPresent()) {
                    admin.abortTransaction(new AbortTransactionSpec(tp0, p.producerId(), (short) p.producerEpoch(),
                            p.coordinatorEpoch().orElse(-1))).all().get();
                }
            }
        }
        hanging.close(Duration.ZERO);
        Properties cp = new Properties();
        cp.put("bootstrap.servers", b);
        cp.put("isolation.level", "read_committed");
        try (Consumer<String, String> c = new KafkaConsumer<>(cp, new StringDeserializer(), new StringDeserializer())) {
            TopicPartition tp = new TopicPartition("javatxn-a", 0);
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            int got = 0;
            long end = System.currentTimeMillis() + 10_000;
            while (got < 3 && System.currentTimeMillis() < end) got += c.poll(Duration.ofMillis(200)).count();
            System.out.println("read committed " + got);
        }
    }
}
