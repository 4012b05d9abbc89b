// The Kafka-client side of scripts/faults, on Apache Kafka's own Java clients.
//
//   create  BOOTSTRAP TOPIC PARTITIONS             RF 3, min.insync.replicas=2
//   leaders BOOTSTRAP TOPIC                         "partition leader isr-size controller" per line
//   writer  BOOTSTRAP TOPIC STOPFILE ACKFILE        idempotent acks=all producer writing value N
//                                                  to partition N % partitions until STOPFILE
//                                                  exists; ACKFILE gets "ack P OFFSET N" per
//                                                  acknowledged record, then "sent N"
//   follow  BOOTSTRAP TOPIC STOPFILE OUTFILE        a consumer reading while the faults run:
//                                                  "P OFFSET N" per record; fails if an
//                                                  offset ever goes back
//   check   BOOTSTRAP TOPIC ACKFILE FOLLOWFILE      every acknowledged record is stored once, at
//                                                  its acknowledged offset, in order per
//                                                  partition, and whatever the follower saw
//                                                  is still there
//   produce BOOTSTRAP TOPIC COUNT                   values 0..COUNT-1, partition N % partitions,
//                                                  idempotent, acks=all
//   consume BOOTSTRAP TOPIC GROUP PER TOTAL OUTFILE a classic-protocol group member: reads at
//                                                  most PER records of each partition and
//                                                  TOTAL in all (fewer if none come for 20 s),
//                                                  commits exactly what it read after each
//                                                  poll, writes "P OFFSET N" per record and
//                                                  prints "committed P OFFSET" lines
//   pick-group BOOTSTRAP                            a group id (g0..g29) whose coordinator's
//                                                  broker is also the controller, then that
//                                                  broker's id
//   controller BOOTSTRAP                            the controller's broker id
//   coordinator BOOTSTRAP GROUP                     the broker id of GROUP's coordinator (a
//                                                  KRaft cluster has no controller broker)
//   committed BOOTSTRAP GROUP                       "committed P OFFSET" per partition, as the
//                                                  group's coordinator serves them
//   member  BOOTSTRAP TOPIC GROUP STOPFILE PAUSEFILE OUTFILE
//                                                  a classic-protocol group member running until
//                                                  STOPFILE exists: writes "P OFFSET N" per record,
//                                                  commits what it read after each poll (retried
//                                                  until it lands); while PAUSEFILE exists it
//                                                  pauses its partitions (still a member) and
//                                                  writes its committed offsets to PAUSEFILE.acked
//   group-check BOOTSTRAP GROUP READFILE COMMITTEDFILE
//                                                  the coordinator serves exactly the offsets in
//                                                  COMMITTEDFILE ("committed P OFFSET" lines), and
//                                                  READFILE holds each offset below them once
//   wait-isr BOOTSTRAP SECONDS BROKERS TOPIC...     waits until BROKERS brokers are registered and
//                                                  every partition of the topics has a leader and
//                                                  all its replicas in the ISR
//
//   txn-writer BOOTSTRAP TOPIC STOPFILE OUTFILE SEED
//                                                  a transactional producer until STOPFILE exists:
//                                                  transactions of 2-20 records ("<txn>.<i>") over
//                                                  the topic's partitions, a quarter of them
//                                                  aborted; OUTFILE gets "commit T K" or "abort T K"
//                                                  once the outcome is known
//   txn-check BOOTSTRAP TOPIC OUTFILE               a read_committed consumer sees every record of
//                                                  each committed transaction exactly once, in
//                                                  order per partition, and none of an aborted one
//
// check --running (instead of check) accepts an ack file the writer is still writing.
//
// Exits 1 with a one-line reason on stderr when something is wrong.
import java.io.BufferedWriter;
import java.io.FileWriter;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class FaultClient {
    static void die(String msg) {
        System.err.println(msg);
        System.exit(1);
    }

    /** A comma-separated list of files. */
    static List<Path> paths(String list) {
        return java.util.Arrays.stream(list.split(",")).map(Path::of).toList();
    }

    public static void main(String[] a) throws Exception {
        switch (a[0]) {
            case "create" -> create(a[1], a[2], Integer.parseInt(a[3]));
            case "leaders" -> leaders(a[1], a[2]);
            case "writer" -> writer(a[1], a[2], Path.of(a[3]), a[4]);
            case "follow" -> follow(a[1], a[2], Path.of(a[3]), a[4]);
            case "check" -> check(a[1], a[2], Path.of(a[3]), Path.of(a[4]), false);
            case "check-running" -> check(a[1], a[2], Path.of(a[3]), Path.of(a[4]), true);
            case "produce" -> produce(a[1], a[2], Long.parseLong(a[3]));
            case "consume" -> consume(a[1], a[2], a[3], Long.parseLong(a[4]), Long.parseLong(a[5]), a[6],
                a.length > 7 ? a[7] : "classic");
            case "pick-group" -> pickGroup(a[1]);
            case "controller" -> controller(a[1]);
            case "coordinator" -> coordinator(a[1], a[2]);
            case "committed" -> committed(a[1], a[2]);
            case "member" -> member(a[1], a[2], a[3], Path.of(a[4]), Path.of(a[5]), a[6],
                a.length > 7 ? Long.parseLong(a[7]) : 0);
            case "group-check" -> groupCheck(a[1], a[2], paths(a[3]), paths(a[4]));
            case "txn-writer" -> txnWriter(a[1], a[2], Path.of(a[3]), a[4], Long.parseLong(a[5]),
                a.length > 6 && a[6].equals("offsets"));
            case "txn-check" -> txnCheck(a[1], a[2], Path.of(a[3]));
            case "wait-isr" -> waitIsr(a[1], Integer.parseInt(a[2]), Integer.parseInt(a[3]),
                List.of(a).subList(4, a.length));
            default -> die("unknown command " + a[0]);
        }
        System.exit(0);
    }

    static Admin admin(String bs) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bs);
        p.put("default.api.timeout.ms", "20000");
        p.put("request.timeout.ms", "5000");
        return Admin.create(p);
    }

    static void create(String bs, String topic, int partitions) throws Exception {
        long deadline = System.currentTimeMillis() + 120_000;
        try (Admin admin = admin(bs)) {
            NewTopic t = new NewTopic(topic, partitions, (short) 3)
                .configs(Map.of("min.insync.replicas", "2"));
            while (true) {
                try {
                    admin.createTopics(List.of(t)).all().get();
                    return;
                } catch (java.util.concurrent.ExecutionException e) {
                    // A request that timed out on a busy cluster may have created the topic.
                    if (e.getCause() instanceof org.apache.kafka.common.errors.TopicExistsException) return;
                    if (!(e.getCause() instanceof org.apache.kafka.common.errors.RetriableException)
                        || System.currentTimeMillis() > deadline) throw e;
                    Thread.sleep(1000);
                }
            }
        }
    }

    static void leaders(String bs, String topic) throws Exception {
        try (Admin admin = admin(bs)) {
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            var controller = admin.describeCluster().controller().get();
            int controllerId = controller == null ? -1 : controller.id();
            for (TopicPartitionInfo p : d.partitions()) {
                int leader = p.leader() == null ? -1 : p.leader().id();
                System.out.println(p.partition() + " " + leader + " " + p.isr().size() + " " + controllerId);
            }
        }
    }

    static int partitionCount(String bs, String topic) throws Exception {
        try (Admin admin = admin(bs)) {
            return admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size();
        }
    }

    static void writer(String bs, String topic, Path stop, String ackFile) throws Exception {
        int partitions = partitionCount(bs, topic);
        Properties p = new Properties();
        p.put("bootstrap.servers", bs);
        p.put("enable.idempotence", "true");
        p.put("acks", "all");
        p.put("linger.ms", "5");
        p.put("request.timeout.ms", "8000");
        // Outlive every fault the harness injects: a record is either acknowledged or the
        // run fails, never silently dropped.
        p.put("delivery.timeout.ms", "600000");
        p.put("max.block.ms", "600000");
        p.put("reconnect.backoff.max.ms", "500");
        p.put("metadata.max.age.ms", "2000");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        BufferedWriter out = new BufferedWriter(new FileWriter(ackFile));
        AtomicLong outstanding = new AtomicLong();
        List<String> errors = Collections.synchronizedList(new ArrayList<>());
        long sent = 0;
        long retried, failed;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            while (!Files.exists(stop)) {
                if (outstanding.get() >= 200) {
                    Thread.sleep(5);
                    continue;
                }
                final long n = sent++;
                outstanding.incrementAndGet();
                producer.send(new ProducerRecord<>(topic, (int) (n % partitions), null, Long.toString(n)),
                    (md, e) -> {
                        outstanding.decrementAndGet();
                        synchronized (out) {
                            try {
                                if (e != null) {
                                    errors.add(n + ": " + e);
                                    out.write("error " + n + " " + e.toString().replace('\n', ' ') + "\n");
                                } else {
                                    out.write("ack " + md.partition() + " " + md.offset() + " " + n + "\n");
                                }
                                // The harness counts acknowledged writes in the file as they come.
                                out.flush();
                            } catch (IOException io) {
                                errors.add(io.toString());
                            }
                        }
                    });
                if (n % 4 == 0) Thread.sleep(2);
            }
            producer.flush();
            retried = (long) metric(producer, "record-retry-total");
            failed = (long) metric(producer, "record-error-total");
        }
        synchronized (out) {
            out.write("sent " + sent + "\n");
            out.close();
        }
        // Retries are what a broker leaving or a leader moving costs an idempotent producer;
        // a record error (record-error-total) is one the application saw.
        System.out.println("writer: " + sent + " sent, " + errors.size() + " failed; the producer retried "
            + retried + " records and reported " + failed + " record errors");
    }

    static double metric(KafkaProducer<String, String> producer, String name) {
        return producer.metrics().entrySet().stream()
            .filter(e -> e.getKey().group().equals("producer-metrics") && e.getKey().name().equals(name))
            .mapToDouble(e -> ((Number) e.getValue().metricValue()).doubleValue()).sum();
    }

    static KafkaConsumer<String, String> consumer(String bs) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bs);
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("request.timeout.ms", "8000");
        p.put("metadata.max.age.ms", "2000");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    static List<TopicPartition> assignAll(KafkaConsumer<String, String> c, String topic) {
        List<TopicPartition> tps = c.partitionsFor(topic, Duration.ofSeconds(30)).stream()
            .map(i -> new TopicPartition(topic, i.partition())).collect(Collectors.toList());
        c.assign(tps);
        c.seekToBeginning(tps);
        return tps;
    }

    static void follow(String bs, String topic, Path stop, String outFile) throws Exception {
        Map<Integer, Long> last = new HashMap<>();
        try (KafkaConsumer<String, String> c = consumer(bs);
             BufferedWriter out = new BufferedWriter(new FileWriter(outFile))) {
            assignAll(c, topic);
            long seen = 0;
            while (!Files.exists(stop)) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    Long prev = last.put(r.partition(), r.offset());
                    if (prev != null && r.offset() <= prev) {
                        die("follow: partition " + r.partition() + " went from offset " + prev + " to " + r.offset());
                    }
                    out.write(r.partition() + " " + r.offset() + " " + r.value() + "\n");
                    seen++;
                }
                // The harness sees in the file that the consumer reads.
                out.flush();
            }
            System.out.println("follow: " + seen + " records read while the faults ran");
        }
    }

    static void check(String bs, String topic, Path ackFile, Path followFile, boolean running) throws Exception {
        // partition -> offset -> value, as acknowledged.
        Map<Integer, TreeMap<Long, Long>> acked = new HashMap<>();
        long sent = -1, ackCount = 0;
        List<String> ackLines = Files.readAllLines(ackFile);
        // A writer still running may be in the middle of its last line.
        if (running && !ackLines.isEmpty()) ackLines = ackLines.subList(0, ackLines.size() - 1);
        for (String line : ackLines) {
            String[] f = line.split(" ", 4);
            switch (f[0]) {
                case "ack" -> {
                    acked.computeIfAbsent(Integer.parseInt(f[1]), k -> new TreeMap<>())
                        .put(Long.parseLong(f[2]), Long.parseLong(f[3]));
                    ackCount++;
                }
                case "error" -> die("check: the writer's record " + f[1] + " failed: " + f[2]);
                case "sent" -> sent = Long.parseLong(f[1]);
                default -> die("check: bad line in " + ackFile + ": " + line);
            }
        }
        if (!running) {
            if (sent < 0) die("check: the writer did not finish");
            if (ackCount != sent) die("check: " + sent + " sent but " + ackCount + " acknowledged");
        }

        Map<Integer, TreeMap<Long, Long>> stored = new HashMap<>();
        try (KafkaConsumer<String, String> c = consumer(bs)) {
            List<TopicPartition> tps = assignAll(c, topic);
            Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofSeconds(30));
            Map<TopicPartition, Long> begin = c.beginningOffsets(tps, Duration.ofSeconds(30));
            for (TopicPartition tp : tps) {
                if (begin.get(tp) != 0) die("check: " + tp + " starts at " + begin.get(tp));
            }
            long deadline = System.currentTimeMillis() + 120_000;
            while (tps.stream().anyMatch(tp -> c.position(tp) < end.get(tp))) {
                if (System.currentTimeMillis() > deadline) die("check: could not read up to " + end);
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    stored.computeIfAbsent(r.partition(), k -> new TreeMap<>()).put(r.offset(), Long.parseLong(r.value()));
                }
            }
        }
        Map<Long, String> where = new HashMap<>();
        long total = 0;
        for (var e : stored.entrySet()) {
            long prev = -1;
            for (var r : e.getValue().entrySet()) {
                long n = r.getValue();
                String at = e.getKey() + "@" + r.getKey();
                String dup = where.put(n, at);
                if (dup != null) die("check: value " + n + " stored twice, at " + dup + " and " + at);
                if (n <= prev) die("check: partition " + e.getKey() + " out of order: " + prev + " then " + n + " at " + at);
                prev = n;
                total++;
            }
        }
        for (var e : acked.entrySet()) {
            TreeMap<Long, Long> log = stored.getOrDefault(e.getKey(), new TreeMap<>());
            for (var r : e.getValue().entrySet()) {
                Long got = log.get(r.getKey());
                if (!r.getValue().equals(got)) {
                    die("check: acknowledged value " + r.getValue() + " at " + e.getKey() + "@" + r.getKey()
                        + " but the log holds " + got + " there (value stored at " + where.get(r.getValue()) + ")");
                }
            }
        }
        long followed = 0;
        for (String line : Files.readAllLines(followFile)) {
            String[] f = line.split(" ");
            int part = Integer.parseInt(f[0]);
            long off = Long.parseLong(f[1]);
            Long got = stored.getOrDefault(part, new TreeMap<>()).get(off);
            if (got == null || got != Long.parseLong(f[2])) {
                die("check: a consumer read " + f[2] + " at " + part + "@" + off + " during the faults; the log now holds " + got);
            }
            followed++;
        }
        System.out.println("check: " + ackCount + " acknowledged writes, each stored once at its offset and in order ("
            + total + " records stored); the " + followed + " records a consumer read during the faults are all still there");
    }

    static void produce(String bs, String topic, long count) throws Exception {
        int partitions = partitionCount(bs, topic);
        Properties p = new Properties();
        p.put("bootstrap.servers", bs);
        p.put("enable.idempotence", "true");
        p.put("acks", "all");
        p.put("linger.ms", "5");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            List<java.util.concurrent.Future<?>> sent = new ArrayList<>();
            for (long n = 0; n < count; n++) {
                sent.add(producer.send(new ProducerRecord<>(topic, (int) (n % partitions), null, Long.toString(n))));
            }
            for (var f : sent) f.get();
        }
    }

    static void consume(String bs, String topic, String group, long perPartition, long max, String outFile,
        String protocol) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bs);
        p.put("group.id", group);
        p.put("group.protocol", protocol);
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("request.timeout.ms", "8000");
        p.put("default.api.timeout.ms", "60000");
        p.put("metadata.max.age.ms", "2000");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        Map<TopicPartition, org.apache.kafka.clients.consumer.OffsetAndMetadata> committed = new TreeMap<>(
            java.util.Comparator.comparing(TopicPartition::partition));
        Map<Integer, Long> perPart = new HashMap<>();
        long got = 0, idleSince = System.currentTimeMillis();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p);
             BufferedWriter out = new BufferedWriter(new FileWriter(outFile))) {
            c.subscribe(List.of(topic));
            while (got < max && System.currentTimeMillis() - idleSince < 20_000) {
                Map<TopicPartition, org.apache.kafka.clients.consumer.OffsetAndMetadata> read = new HashMap<>();
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    if (got == max) break;
                    // Past its share of a partition the record is neither counted nor
                    // committed: the next member reads it.
                    if (perPart.merge(r.partition(), 1L, Long::sum) > perPartition) continue;
                    out.write(r.partition() + " " + r.offset() + " " + r.value() + "\n");
                    read.put(new TopicPartition(r.topic(), r.partition()),
                        new OffsetAndMetadata(r.offset() + 1));
                    got++;
                }
                if (read.isEmpty()) continue;
                idleSince = System.currentTimeMillis();
                // Retried until it lands: what was read is what is committed.
                while (true) {
                    try {
                        c.commitSync(read, Duration.ofSeconds(30));
                        break;
                    } catch (org.apache.kafka.common.errors.RetriableException e) {
                        System.err.println("commit retried: " + e);
                    }
                }
                committed.putAll(read);
            }
        }
        for (var e : committed.entrySet()) {
            System.out.println("committed " + e.getKey().partition() + " " + e.getValue().offset());
        }
    }

    static void pickGroup(String bs) throws Exception {
        try (Admin admin = admin(bs)) {
            int controller = admin.describeCluster().controller().get().id();
            List<String> groups = new ArrayList<>();
            for (int i = 0; i < 30; i++) groups.add("g" + i);
            var described = admin.describeConsumerGroups(groups).all().get();
            for (String g : groups) {
                if (described.get(g).coordinator().id() == controller) {
                    System.out.println(g + " " + controller);
                    return;
                }
            }
            die("pick-group: no group of g0..g29 is coordinated by the controller, broker " + controller);
        }
    }

    static void controller(String bs) throws Exception {
        try (Admin admin = admin(bs)) {
            System.out.println(admin.describeCluster().controller().get().id());
        }
    }

    static void coordinator(String bs, String group) throws Exception {
        try (Admin admin = admin(bs)) {
            var described = admin.describeConsumerGroups(List.of(group)).all().get();
            System.out.println(described.get(group).coordinator().id());
        }
    }

    static void committed(String bs, String group) throws Exception {
        try (Admin admin = admin(bs)) {
            var offsets = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            new TreeMap<>(offsets.entrySet().stream().collect(Collectors.toMap(
                e -> e.getKey().partition(), e -> e.getValue().offset()))).forEach(
                (part, off) -> System.out.println("committed " + part + " " + off));
        }
    }

    /**
     * One member of a consumer group reading `topic` and committing after every poll
     * through the faults. With `cycleMs` > 0 it leaves the group and joins again (a new
     * consumer) every `cycleMs`, so the group rebalances between the faults too. A commit
     * refused because the group rebalanced meanwhile is lost: its records go to the
     * partitions' next owner, which reads them again ("lost N" lines say how many).
     */
    static void member(String bs, String topic, String group, Path stop, Path pause, String outFile, long cycleMs)
        throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bs);
        p.put("group.id", group);
        p.put("group.protocol", "classic");
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("request.timeout.ms", "8000");
        p.put("default.api.timeout.ms", "60000");
        p.put("metadata.max.age.ms", "2000");
        p.put("reconnect.backoff.max.ms", "500");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        Map<Integer, Long> committed = new TreeMap<>();
        Path acked = Path.of(pause + ".acked");
        long got = 0, retried = 0, lost = 0, joins = 0;
        boolean paused = false;
        try (BufferedWriter out = new BufferedWriter(new FileWriter(outFile))) {
            while (!Files.exists(stop)) {
                long leaveAt = cycleMs > 0 ? System.currentTimeMillis() + cycleMs : Long.MAX_VALUE;
                joins++;
                try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
                    c.subscribe(List.of(topic));
                    while (!Files.exists(stop) && System.currentTimeMillis() < leaveAt) {
                        if (Files.exists(pause)) {
                            // Paused partitions return no records, but poll() keeps the membership.
                            c.pause(c.assignment());
                            if (!paused) {
                                out.flush();
                                Files.writeString(acked, committedLines(committed));
                                paused = true;
                            }
                        } else if (paused) {
                            Files.deleteIfExists(acked);
                            c.resume(c.paused());
                            paused = false;
                        }
                        Map<TopicPartition, OffsetAndMetadata> read = new HashMap<>();
                        int n = 0;
                        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                            out.write(r.partition() + " " + r.offset() + " " + r.value() + "\n");
                            read.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                            got++;
                            n++;
                        }
                        if (read.isEmpty()) continue;
                        // Retried until it lands or the group has moved on: what was read is
                        // what is committed, or its records are another member's to read.
                        boolean landed = false;
                        while (true) {
                            try {
                                c.commitSync(read, Duration.ofSeconds(30));
                                landed = true;
                                break;
                            } catch (org.apache.kafka.common.errors.RetriableException e) {
                                retried++;
                                System.err.println("commit retried: " + e);
                            } catch (org.apache.kafka.clients.consumer.CommitFailedException
                                     | org.apache.kafka.common.errors.RebalanceInProgressException e) {
                                System.err.println("commit lost to a rebalance (" + n + " records): " + e);
                                lost += n;
                                break;
                            }
                        }
                        if (landed) read.forEach((tp, o) -> committed.put(tp.partition(), o.offset()));
                    }
                }
            }
        }
        System.out.print(committedLines(committed));
        System.out.println("lost " + lost);
        System.out.println("member: " + got + " records read, " + retried + " commits retried, " + lost
            + " records' commits lost to rebalances, " + joins + " joins");
    }

    static String committedLines(Map<Integer, Long> committed) {
        StringBuilder b = new StringBuilder();
        committed.forEach((part, off) -> b.append("committed ").append(part).append(' ').append(off).append('\n'));
        return b.toString();
    }

    /**
     * The group's verdict over its members' logs: the coordinator serves, for each
     * partition, the highest offset any member committed (committed offsets never went
     * back), every offset below it was read (nothing skipped across rebalances and faults),
     * and an offset was read twice only where a member's commit was lost to a rebalance.
     */
    static void groupCheck(String bs, String group, List<Path> readFiles, List<Path> committedFiles) throws Exception {
        Map<Integer, Long> want = new TreeMap<>();
        long lost = 0;
        for (Path committedFile : committedFiles) {
            for (String line : Files.readAllLines(committedFile)) {
                String[] f = line.split(" ");
                if (f[0].equals("committed")) want.merge(Integer.parseInt(f[1]), Long.parseLong(f[2]), Math::max);
                else if (f[0].equals("lost")) lost += Long.parseLong(f[1]);
            }
        }
        Map<Integer, Long> served = new TreeMap<>();
        try (Admin admin = admin(bs)) {
            admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
                .forEach((tp, o) -> served.put(tp.partition(), o.offset()));
        }
        if (!served.equals(want)) {
            die("group-check: the coordinator serves " + served + ", the members' highest commits were " + want
                + (served.entrySet().stream().anyMatch(e -> e.getValue() < want.getOrDefault(e.getKey(), 0L))
                    ? " (a committed offset went back)" : ""));
        }
        Map<Integer, java.util.BitSet> read = new HashMap<>();
        long records = 0, twice = 0;
        for (Path readFile : readFiles) {
            for (String line : Files.readAllLines(readFile)) {
                String[] f = line.split(" ");
                int part = Integer.parseInt(f[0]);
                int off = Math.toIntExact(Long.parseLong(f[1]));
                java.util.BitSet seen = read.computeIfAbsent(part, k -> new java.util.BitSet());
                if (seen.get(off)) twice++;
                seen.set(off);
                records++;
            }
        }
        if (twice > lost) {
            die("group-check: " + group + " read " + twice + " offsets twice, but only " + lost
                + " records' commits were lost to rebalances");
        }
        for (var e : want.entrySet()) {
            java.util.BitSet seen = read.getOrDefault(e.getKey(), new java.util.BitSet());
            long below = e.getValue();
            if (seen.nextClearBit(0) < below) {
                die("group-check: partition " + e.getKey() + " committed at " + below + " but offset "
                    + seen.nextClearBit(0) + " was never read");
            }
        }
        if (!read.keySet().equals(want.keySet())) die("group-check: read partitions " + read.keySet() + ", committed " + want.keySet());
        System.out.println("group-check: " + group + " committed " + want + " (the coordinator serves the same), "
            + records + " records read by " + readFiles.size() + " members, every offset below them, " + twice
            + " read again after " + lost + " records' commits were lost to rebalances");
    }

    /** The group whose offset each transaction commits inside itself. */
    static final String TXN_GROUP = "faults-txn-offsets";

    static void txnWriter(String bs, String topic, Path stop, String outFile, long seed, boolean offsets)
        throws Exception {
        int partitions = partitionCount(bs, topic);
        java.util.Random random = new java.util.Random(seed);
        Properties p = new Properties();
        p.put("bootstrap.servers", bs);
        p.put("transactional.id", "faults-txn");
        p.put("acks", "all");
        p.put("linger.ms", "5");
        p.put("request.timeout.ms", "8000");
        p.put("delivery.timeout.ms", "120000");
        p.put("transaction.timeout.ms", "60000");
        p.put("max.block.ms", "120000");
        p.put("reconnect.backoff.max.ms", "500");
        p.put("metadata.max.age.ms", "2000");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        long committed = 0, aborted = 0, retried = 0, fenced = 0;
        KafkaProducer<String, String> producer = new KafkaProducer<>(p);
        try (BufferedWriter out = new BufferedWriter(new FileWriter(outFile))) {
            out.write("offsets " + offsets + "\n");
            producer.initTransactions();
            for (long txn = 0; !Files.exists(stop); txn++) {
                int k = 2 + random.nextInt(19);
                boolean abort = random.nextInt(4) == 0;
                producer.beginTransaction();
                boolean failed = false;
                try {
                    List<java.util.concurrent.Future<?>> sent = new ArrayList<>();
                    for (int i = 0; i < k; i++) {
                        sent.add(producer.send(new ProducerRecord<>(topic, random.nextInt(partitions), null, txn + "." + i)));
                    }
                    for (var f : sent) f.get();
                } catch (java.util.concurrent.ExecutionException e) {
                    // A send that failed for good makes the transaction abortable only.
                    System.err.println("txn " + txn + ": a send failed, aborting: " + e.getCause());
                    failed = true;
                }
                // An offset committed inside the transaction (Jepsen's Bufstream check):
                // TXN_GROUP's offset of partition 0 becomes this transaction's number + 1,
                // so it must end at the last committed transaction's, never an aborted one's.
                // A timeout leaves the call to be retried before anything else (KIP-691).
                while (offsets && !failed) {
                    try {
                        producer.sendOffsetsToTransaction(
                            Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(txn + 1, "txn " + txn)),
                            new ConsumerGroupMetadata(TXN_GROUP));
                        break;
                    } catch (org.apache.kafka.common.errors.TimeoutException e) {
                        retried++;
                        System.err.println("txn " + txn + ": offsets retried: " + e);
                    } catch (org.apache.kafka.common.KafkaException e) {
                        // Fenced or refused: the transaction is aborted below (a fenced
                        // producer's abort is handled there).
                        System.err.println("txn " + txn + ": offsets not added, aborting: " + e);
                        failed = true;
                    }
                }
                if (abort || failed) {
                    try {
                        producer.abortTransaction();
                    } catch (org.apache.kafka.common.errors.ProducerFencedException e) {
                        // A send stuck past transaction.timeout.ms: the coordinator aborted
                        // the transaction itself and bumped the epoch, so this producer is
                        // fenced. The transaction is aborted either way; go on with a new
                        // producer, as an application does (said loudly: it is a stall).
                        System.err.println("txn " + txn + ": fenced after the coordinator aborted it on its timeout; a new producer goes on: " + e);
                        producer.close(Duration.ZERO);
                        producer = new KafkaProducer<>(p);
                        producer.initTransactions();
                        fenced++;
                    }
                    out.write("abort " + txn + " " + k + "\n");
                    aborted++;
                } else {
                    // A commit that timed out has an unknown outcome until it is retried
                    // (KIP-691): retried until it returns, so the outcome written is known.
                    boolean done = false;
                    while (true) {
                        try {
                            producer.commitTransaction();
                            done = true;
                            break;
                        } catch (org.apache.kafka.common.errors.TimeoutException e) {
                            retried++;
                            System.err.println("txn " + txn + ": commit retried: " + e);
                        } catch (org.apache.kafka.common.errors.ProducerFencedException e) {
                            // Only the coordinator's abort on the transaction's timeout
                            // bumps the epoch of this sole producer: the transaction is
                            // aborted (a commit it had taken would have completed).
                            System.err.println("txn " + txn + ": fenced after the coordinator aborted it on its timeout; a new producer goes on: " + e);
                            producer.close(Duration.ZERO);
                            producer = new KafkaProducer<>(p);
                            producer.initTransactions();
                            fenced++;
                            break;
                        }
                    }
                    if (done) {
                        out.write("commit " + txn + " " + k + "\n");
                        committed++;
                    } else {
                        out.write("abort " + txn + " " + k + "\n");
                        aborted++;
                    }
                }
                out.flush();
            }
        } finally {
            producer.close();
        }
        System.out.println("txn-writer: " + committed + " transactions committed, " + aborted + " aborted, "
            + retried + " commits retried, " + fenced + " fenced after a stall");
    }

    static void txnCheck(String bs, String topic, Path outFile) throws Exception {
        Map<Long, Integer> commits = new HashMap<>();
        java.util.Set<Long> aborts = new java.util.HashSet<>();
        boolean offsets = false;
        for (String line : Files.readAllLines(outFile)) {
            String[] f = line.split(" ");
            if (f[0].equals("commit")) commits.put(Long.parseLong(f[1]), Integer.parseInt(f[2]));
            else if (f[0].equals("abort")) aborts.add(Long.parseLong(f[1]));
            else if (f[0].equals("offsets")) offsets = Boolean.parseBoolean(f[1]);
        }
        Properties p = new Properties();
        p.put("bootstrap.servers", bs);
        p.put("isolation.level", "read_committed");
        p.put("enable.auto.commit", "false");
        p.put("request.timeout.ms", "8000");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        Map<Long, java.util.BitSet> seen = new HashMap<>();
        long records = 0;
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = assignAll(c, topic);
            // Under read_committed the end offsets are the last stable offsets.
            Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofSeconds(30));
            Map<Integer, long[]> lastInPartition = new HashMap<>();
            long deadline = System.currentTimeMillis() + 120_000;
            while (tps.stream().anyMatch(tp -> c.position(tp) < end.get(tp))) {
                if (System.currentTimeMillis() > deadline) die("txn-check: could not read up to " + end);
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    String[] v = r.value().split("\\.");
                    long txn = Long.parseLong(v[0]);
                    int i = Integer.parseInt(v[1]);
                    if (aborts.contains(txn)) die("txn-check: aborted transaction " + txn + "'s record " + i + " visible at " + r.partition() + "@" + r.offset());
                    if (!commits.containsKey(txn)) die("txn-check: record " + r.value() + " of an unknown transaction visible at " + r.partition() + "@" + r.offset());
                    java.util.BitSet b = seen.computeIfAbsent(txn, t -> new java.util.BitSet());
                    if (b.get(i)) die("txn-check: record " + r.value() + " visible twice (again at " + r.partition() + "@" + r.offset() + ")");
                    b.set(i);
                    long[] last = lastInPartition.get(r.partition());
                    if (last != null && (txn < last[0] || (txn == last[0] && i < last[1]))) {
                        die("txn-check: partition " + r.partition() + " out of order: " + last[0] + "." + last[1] + " then " + r.value());
                    }
                    lastInPartition.put(r.partition(), new long[] {txn, i});
                    records++;
                }
            }
        }
        for (var e : commits.entrySet()) {
            java.util.BitSet b = seen.getOrDefault(e.getKey(), new java.util.BitSet());
            if (b.cardinality() != e.getValue()) {
                die("txn-check: committed transaction " + e.getKey() + " has " + b.cardinality() + " of its " + e.getValue() + " records visible");
            }
        }
        // The offset committed inside the transactions moved with them: it is the last
        // committed transaction's, whatever was aborted after it.
        long last = commits.keySet().stream().mapToLong(Long::longValue).max().orElse(-1);
        if (!offsets) {
            System.out.println("txn-check: " + commits.size() + " committed transactions wholly visible (" + records
                + " records), none of the " + aborts.size() + " aborted ones");
            return;
        }
        OffsetAndMetadata offset;
        try (Admin admin = admin(bs)) {
            offset = admin.listConsumerGroupOffsets(TXN_GROUP).partitionsToOffsetAndMetadata()
                .get().get(new TopicPartition(topic, 0));
        }
        if (last < 0 && offset != null) die("txn-check: no transaction committed, yet " + TXN_GROUP + " has offset " + offset);
        if (last >= 0) {
            if (offset == null) die("txn-check: " + TXN_GROUP + " has no offset; the last committed transaction was " + last);
            long at = offset.offset() - 1;
            if (at != last || !offset.metadata().equals("txn " + last)) {
                die("txn-check: " + TXN_GROUP + "'s offset is transaction " + at + "'s (" + offset.metadata() + ", "
                    + (aborts.contains(at) ? "an aborted one" : commits.containsKey(at) ? "an earlier committed one" : "unknown")
                    + "); the last committed transaction was " + last);
            }
        }
        System.out.println("txn-check: " + commits.size() + " committed transactions wholly visible (" + records
            + " records), none of the " + aborts.size() + " aborted ones; the offset committed inside them is the last"
            + " committed one's (" + (last + 1) + ")");
    }

    static void waitIsr(String bs, int seconds, int brokers, List<String> topics) throws Exception {
        long deadline = System.currentTimeMillis() + seconds * 1000L;
        String state = "";
        try (Admin admin = admin(bs)) {
            while (System.currentTimeMillis() < deadline) {
                try {
                    int live = admin.describeCluster().nodes().get().size();
                    StringBuilder lagging = new StringBuilder();
                    for (TopicDescription d : admin.describeTopics(topics).allTopicNames().get().values()) {
                        for (TopicPartitionInfo pi : d.partitions()) {
                            if (pi.leader() == null || pi.isr().size() != pi.replicas().size()) {
                                lagging.append(' ').append(d.name()).append('-').append(pi.partition())
                                    .append(" leader ").append(pi.leader() == null ? -1 : pi.leader().id())
                                    .append(" isr ").append(pi.isr().stream().map(n -> n.id()).collect(Collectors.toList()));
                            }
                        }
                    }
                    if (live == brokers && lagging.length() == 0) return;
                    state = live + " brokers;" + lagging;
                } catch (java.util.concurrent.ExecutionException e) {
                    state = e.getCause().toString();
                }
                Thread.sleep(1000);
            }
        }
        die("wait-isr: not full within " + seconds + " s: " + state);
    }
}
