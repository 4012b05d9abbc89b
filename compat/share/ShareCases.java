// skua compatibility suite: share groups (KIP-932) with Apache Kafka's KafkaShareConsumer.
//   java -cp 'KAFKA_LIBS/*' compat/share/ShareCases.java HOST:PORT [CASE...]
// Prints one `PASS id` / `FAIL id: reason` line per case. Run by compat/share/share.sh
// with kafka-clients 4.4 (share groups are production-ready from Kafka 4.2).
//
// Each case uses its own topic and group; the group's `share.auto.offset.reset` is set to
// `earliest` (a group config, IncrementalAlterConfigs on resource type GROUP) before any
// member reads, so records produced before the members joined are delivered.

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ShareCases {
    static String bootstrap;
    static final String RUN = Long.toHexString(System.nanoTime() & 0xffffffL);

    interface Case {
        void run() throws Exception;
    }

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        Map<String, Case> cases = new java.util.LinkedHashMap<>();
        cases.put("share.java.three_consumers_exactly_once", ShareCases::threeConsumersExactlyOnce);
        cases.put("share.java.release_redelivers", ShareCases::releaseRedelivers);
        cases.put("share.java.reject_archives", ShareCases::rejectArchives);
        cases.put("share.java.kill9_redelivers", ShareCases::kill9Redelivers);
        cases.put("share.java.delivery_limit_archives", ShareCases::deliveryLimitArchives);
        cases.put("share.tools.share_groups_command", ShareCases::shareGroupsCommand);
        if (args.length == 4 && args[1].equals("hold")) {
            hold(args[2], args[3]);
            return;
        }
        List<String> only = List.of(args).subList(1, args.length);
        for (Map.Entry<String, Case> c : cases.entrySet()) {
            if (!only.isEmpty() && !only.contains(c.getKey())) continue;
            try {
                c.getValue().run();
                System.out.println("PASS " + c.getKey());
            } catch (Throwable t) {
                String why = String.valueOf(t).replace('\n', ' ');
                System.out.println("FAIL " + c.getKey() + ": " + why.substring(0, Math.min(400, why.length())));
            }
            System.out.flush();
        }
        System.exit(0);
    }

    static void check(boolean ok, String why) {
        if (!ok) throw new AssertionError(why);
    }

    /** A one-partition topic and a share group reading it from the earliest offset,
     *  with `groupConfigs` set on the group besides. */
    static void setUp(String topic, String group, String... groupConfigs) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(p)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            ConfigResource g = new ConfigResource(ConfigResource.Type.GROUP, group);
            List<AlterConfigOp> ops = new ArrayList<>();
            ops.add(new AlterConfigOp(
                new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET));
            for (int i = 0; i + 1 < groupConfigs.length; i += 2) {
                ops.add(new AlterConfigOp(
                    new ConfigEntry(groupConfigs[i], groupConfigs[i + 1]), AlterConfigOp.OpType.SET));
            }
            admin.incrementalAlterConfigs(Map.of(g, ops)).all().get();
        }
    }

    /** `n` records "0".."n-1", each in a batch of its own (sent and flushed one by one). */
    static void produce(String topic, int from, int n) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = from; i < from + n; i++) {
                producer.send(new ProducerRecord<>(topic, 0, null, Integer.toString(i))).get();
            }
        }
    }

    static KafkaShareConsumer<String, String> consumer(String group, boolean explicit, int maxPollRecords) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, Integer.toString(maxPollRecords));
        p.put("share.acknowledgement.mode", explicit ? "explicit" : "implicit");
        return new KafkaShareConsumer<>(p);
    }

    /** Three members of one group on one partition: every record reaches exactly one of
     *  them, and each of them gets some. */
    static void threeConsumersExactlyOnce() throws Exception {
        String topic = "share-three-" + RUN, group = "share-three-" + RUN;
        int n = 300;
        setUp(topic, group);
        Map<String, List<String>> got = new ConcurrentHashMap<>();
        List<Throwable> errors = new CopyOnWriteArrayList<>();
        AtomicBoolean done = new AtomicBoolean();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            String name = "c" + i;
            got.put(name, new CopyOnWriteArrayList<>());
            Thread t = new Thread(() -> {
                try (KafkaShareConsumer<String, String> c = consumer(group, false, 10)) {
                    c.subscribe(List.of(topic));
                    while (!done.get()) {
                        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                            got.get(name).add(r.value());
                        }
                        // Slow members, so that the others' fetches acquire in between.
                        Thread.sleep(50);
                    }
                    c.commitSync();
                } catch (Throwable e) {
                    errors.add(e);
                }
            });
            threads.add(t);
            t.start();
        }
        // Records are produced once all three members are assigned the partition
        // (ShareGroupDescribe through the admin client), so that each of them competes.
        awaitMembers(group, 3, 30_000);
        produce(topic, 0, n);
        long deadline = System.currentTimeMillis() + 60_000;
        while (System.currentTimeMillis() < deadline
                && got.values().stream().mapToInt(List::size).sum() < n && errors.isEmpty()) {
            Thread.sleep(100);
        }
        // A little longer: a duplicate delivered late would show.
        Thread.sleep(1000);
        done.set(true);
        for (Thread t : threads) t.join(30_000);
        check(errors.isEmpty(), "consumer failed: " + errors);
        Map<String, Integer> seen = new TreeMap<>();
        for (List<String> values : got.values()) {
            for (String v : values) seen.merge(v, 1, Integer::sum);
        }
        List<String> dupes = new ArrayList<>();
        seen.forEach((v, count) -> { if (count > 1) dupes.add(v + "x" + count); });
        check(dupes.isEmpty(), "delivered more than once: " + dupes);
        check(seen.size() == n, "received " + seen.size() + " of " + n + " records");
        Map<String, Integer> per = new TreeMap<>();
        got.forEach((k, v) -> per.put(k, v.size()));
        check(per.values().stream().allMatch(c -> c > 0), "a member received nothing: " + per);
        System.err.println("records per member: " + per);
    }

    /** Waits until the group has `n` members, each assigned a partition. */
    static void awaitMembers(String group, int n, long ms) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(p)) {
            long deadline = System.currentTimeMillis() + ms;
            String last = "";
            while (System.currentTimeMillis() < deadline) {
                try {
                    var d = admin.describeShareGroups(List.of(group)).all().get().get(group);
                    last = d.toString();
                    long assigned = d.members().stream()
                        .filter(m -> !m.assignment().topicPartitions().isEmpty()).count();
                    if (assigned >= n) return;
                } catch (java.util.concurrent.ExecutionException e) {
                    // Not created yet: no member has joined.
                    last = String.valueOf(e.getCause());
                }
                Thread.sleep(200);
            }
            throw new AssertionError("members not all assigned: " + last);
        }
    }

    /** Polls until `n` records arrived or `ms` passed. */
    static List<ConsumerRecord<String, String>> pollFor(KafkaShareConsumer<String, String> c, int n, long ms) {
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        long deadline = System.currentTimeMillis() + ms;
        while (out.size() < n && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) out.add(r);
        }
        return out;
    }

    /** RELEASE gives the records back: they come again, with delivery count 2. */
    static void releaseRedelivers() throws Exception {
        String topic = "share-release-" + RUN, group = "share-release-" + RUN;
        setUp(topic, group);
        produce(topic, 0, 5);
        try (KafkaShareConsumer<String, String> c = consumer(group, true, 100)) {
            c.subscribe(List.of(topic));
            List<ConsumerRecord<String, String>> first = pollFor(c, 5, 30_000);
            check(first.size() == 5, "first delivery: " + first.size() + " records");
            for (ConsumerRecord<String, String> r : first) {
                check(r.deliveryCount().orElse((short) -1) == 1, "first delivery count " + r.deliveryCount());
                c.acknowledge(r, AcknowledgeType.RELEASE);
            }
            Map<?, ?> committed = c.commitSync();
            check(committed.values().stream().allMatch(e -> ((java.util.Optional<?>) e).isEmpty()),
                "release failed: " + committed);
            List<ConsumerRecord<String, String>> again = pollFor(c, 5, 30_000);
            check(again.size() == 5, "redelivery: " + again.size() + " records");
            for (int i = 0; i < 5; i++) {
                ConsumerRecord<String, String> r = again.get(i);
                check(r.offset() == first.get(i).offset() && r.value().equals(first.get(i).value()),
                    "redelivered " + r.offset() + " for " + first.get(i).offset());
                check(r.deliveryCount().orElse((short) -1) == 2, "redelivery count " + r.deliveryCount());
                c.acknowledge(r, AcknowledgeType.ACCEPT);
            }
            c.commitSync();
            check(pollFor(c, 1, 2_000).isEmpty(), "accepted records came again");
        }
    }

    /** REJECT archives: the rejected records never come again, later ones do. */
    static void rejectArchives() throws Exception {
        String topic = "share-reject-" + RUN, group = "share-reject-" + RUN;
        setUp(topic, group);
        produce(topic, 0, 5);
        try (KafkaShareConsumer<String, String> c = consumer(group, true, 100)) {
            c.subscribe(List.of(topic));
            List<ConsumerRecord<String, String>> first = pollFor(c, 5, 30_000);
            check(first.size() == 5, "first delivery: " + first.size() + " records");
            for (ConsumerRecord<String, String> r : first) c.acknowledge(r, AcknowledgeType.REJECT);
            c.commitSync();
            check(pollFor(c, 1, 2_000).isEmpty(), "rejected records came again");
            produce(topic, 5, 1);
            List<ConsumerRecord<String, String>> next = pollFor(c, 1, 30_000);
            check(next.size() == 1 && next.get(0).value().equals("5") && next.get(0).offset() == 5,
                "after the rejected ones: " + next);
            c.acknowledge(next.get(0), AcknowledgeType.ACCEPT);
            c.commitSync();
        }
    }

    /** The member that is killed: acquires every record of `topic` it can, says which
     *  on stdout and then waits, never acknowledging, until it is killed. */
    static void hold(String topic, String group) throws Exception {
        KafkaShareConsumer<String, String> c = consumer(group, true, 100);
        c.subscribe(List.of(topic));
        List<ConsumerRecord<String, String>> got = pollFor(c, 5, 60_000);
        StringBuilder offsets = new StringBuilder();
        for (ConsumerRecord<String, String> r : got) offsets.append(' ').append(r.offset());
        System.out.println("HELD" + offsets);
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }

    /** A member killed with kill -9 while holding records: another member receives them,
     *  delivery count 2, once the group drops the dead member (its 10 s session timeout),
     *  well before their 60 s acquisition locks would run out. */
    static void kill9Redelivers() throws Exception {
        String topic = "share-kill9-" + RUN, group = "share-kill9-" + RUN;
        setUp(topic, group, "share.session.timeout.ms", "10000",
            "share.record.lock.duration.ms", "60000");
        produce(topic, 0, 5);
        String java = System.getProperty("java.home") + "/bin/java";
        String source = System.getProperty("share.source");
        check(source != null, "-Dshare.source is not set");
        Process holder = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"),
                source, bootstrap, "hold", topic, group)
            .redirectError(ProcessBuilder.Redirect.DISCARD).start();
        String held;
        try (var out = new java.io.BufferedReader(new java.io.InputStreamReader(holder.getInputStream()))) {
            held = out.readLine();
        }
        check(held != null && held.equals("HELD 0 1 2 3 4"), "the holder acquired: " + held);
        holder.destroyForcibly(); // SIGKILL: no leave, no acknowledgement, no closed session
        holder.waitFor();
        long killed = System.currentTimeMillis();
        try (KafkaShareConsumer<String, String> c = consumer(group, true, 100)) {
            c.subscribe(List.of(topic));
            List<ConsumerRecord<String, String>> again = pollFor(c, 5, 50_000);
            long after = System.currentTimeMillis() - killed;
            check(again.size() == 5, "redelivered after the kill: " + again.size() + " records");
            for (ConsumerRecord<String, String> r : again) {
                check(r.deliveryCount().orElse((short) -1) == 2,
                    "offset " + r.offset() + " delivery count " + r.deliveryCount());
                c.acknowledge(r, AcknowledgeType.ACCEPT);
            }
            c.commitSync();
            check(after < 40_000, "redelivered " + after + " ms after the kill (the lock is 60 s)");
            System.err.println("kill9: redelivered " + after + " ms after the kill");
        }
    }

    /** With share.delivery.count.limit=2, a record released twice is archived: it never
     *  comes a third time, and the records after it do. */
    static void deliveryLimitArchives() throws Exception {
        String topic = "share-limit-" + RUN, group = "share-limit-" + RUN;
        setUp(topic, group, "share.delivery.count.limit", "2");
        produce(topic, 0, 3);
        try (KafkaShareConsumer<String, String> c = consumer(group, true, 100)) {
            c.subscribe(List.of(topic));
            for (int delivery = 1; delivery <= 2; delivery++) {
                List<ConsumerRecord<String, String>> got = pollFor(c, 3, 30_000);
                check(got.size() == 3, "delivery " + delivery + ": " + got.size() + " records");
                for (ConsumerRecord<String, String> r : got) {
                    check(r.deliveryCount().orElse((short) -1) == delivery,
                        "delivery " + delivery + " count " + r.deliveryCount());
                    c.acknowledge(r, AcknowledgeType.RELEASE);
                }
                c.commitSync();
            }
            check(pollFor(c, 1, 2_000).isEmpty(), "released past the limit, yet delivered again");
            produce(topic, 3, 1);
            List<ConsumerRecord<String, String>> next = pollFor(c, 1, 30_000);
            check(next.size() == 1 && next.get(0).offset() == 3
                && next.get(0).deliveryCount().orElse((short) -1) == 1,
                "after the archived ones: " + next);
            c.acknowledge(next.get(0), AcknowledgeType.ACCEPT);
            c.commitSync();
        }
    }

    /** Thrown by the tool's exit, so that it ends the call, not this JVM. */
    static class ToolExit extends RuntimeException {
        final int code;
        ToolExit(int code) { super("exit " + code); this.code = code; }
    }

    /** kafka-share-groups.sh: Kafka 4.4's ShareGroupCommand main, which the script runs,
     *  called in this JVM (its Exit hooked, its output captured, a JVM start saved per
     *  call); returns what it printed, failing on a non-zero exit. */
    static synchronized String shareGroups(String... args) throws Exception {
        List<String> argv = new ArrayList<>(List.of("--bootstrap-server", bootstrap));
        argv.addAll(List.of(args));
        java.io.ByteArrayOutputStream buf = new java.io.ByteArrayOutputStream();
        java.io.PrintStream out = System.out, err = System.err;
        int code = 0;
        org.apache.kafka.common.utils.internals.Exit.setExitProcedure((c, msg) -> { throw new ToolExit(c); });
        try (java.io.PrintStream capture = new java.io.PrintStream(buf, true)) {
            System.setOut(capture);
            System.setErr(capture);
            org.apache.kafka.tools.consumer.group.ShareGroupCommand.main(argv.toArray(new String[0]));
        } catch (ToolExit e) {
            code = e.code;
        } finally {
            System.setOut(out);
            System.setErr(err);
            org.apache.kafka.common.utils.internals.Exit.resetExitProcedure();
        }
        String printed = buf.toString();
        check(code == 0, "kafka-share-groups.sh " + String.join(" ", args) + " exited " + code + ": " + printed);
        return printed;
    }

    /** A row of the tool's table: its columns split on whitespace. */
    static boolean hasRow(String out, String... columns) {
        String want = String.join(" ", columns);
        return out.lines().map(l -> l.trim().replaceAll("\\s+", " ")).anyMatch(l -> l.equals(want));
    }

    /** kafka-share-groups.sh against the broker: --list names the group; --describe
     *  --offsets shows each share-partition's start offset and lag (DescribeShareGroupOffsets
     *  v1, KIP-1226: the latest offset less the start offset less the records beyond it
     *  whose delivery is complete); once its members are gone, --reset-offsets
     *  --to-earliest --execute starts it again at 0, which --describe --offsets shows and
     *  a new member proves (every record again, first delivery); --delete removes it. */
    static void shareGroupsCommand() throws Exception {
        String topic = "share-tool-" + RUN, group = "share-tool-" + RUN;
        setUp(topic, group);
        produce(topic, 0, 5);
        try (KafkaShareConsumer<String, String> c = consumer(group, false, 100)) {
            c.subscribe(List.of(topic));
            check(pollFor(c, 5, 30_000).size() == 5, "first member's records");
            c.commitSync();
        }
        String list = shareGroups("--list");
        check(list.lines().anyMatch(l -> l.trim().equals(group)), "--list: " + list);
        // Columns: GROUP TOPIC PARTITION START-OFFSET LAG. The start offset persisted is
        // the one of the write that acknowledged the records (the share-partition moves
        // it past them after that write, and persists it with the next one), so the five
        // count as delivered beyond start offset 0; Kafka 4.4 answers the same.
        String caughtUp = shareGroups("--describe", "--offsets", "--group", group);
        check(hasRow(caughtUp, group, topic, "0", "0", "0"), "--describe --offsets, all accepted: " + caughtUp);
        produce(topic, 5, 3);
        String behind = shareGroups("--describe", "--offsets", "--group", group);
        check(hasRow(behind, group, topic, "0", "0", "3"), "--describe --offsets, 3 produced since: " + behind);

        String reset = shareGroups("--reset-offsets", "--to-earliest", "--execute",
            "--group", group, "--topic", topic);
        check(hasRow(reset, group, topic, "0", "0"), "--reset-offsets: " + reset);
        String offsets = shareGroups("--describe", "--offsets", "--group", group);
        check(hasRow(offsets, group, topic, "0", "0", "8"), "--describe --offsets after the reset: " + offsets);

        // The first record released, the other seven accepted: the start offset stays at
        // 0, and seven records beyond it are complete.
        try (KafkaShareConsumer<String, String> c = consumer(group, true, 100)) {
            c.subscribe(List.of(topic));
            // Each offset's first delivery (a released record 0 may come again before the
            // last ones; it is released again).
            Map<Long, ConsumerRecord<String, String>> again = new TreeMap<>();
            long deadline = System.currentTimeMillis() + 30_000;
            while (again.size() < 8 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    again.putIfAbsent(r.offset(), r);
                    c.acknowledge(r, r.offset() == 0 ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT);
                }
            }
            c.commitSync();
            check(again.keySet().equals(new java.util.TreeSet<>(List.of(0L, 1L, 2L, 3L, 4L, 5L, 6L, 7L)))
                && again.values().stream().allMatch(r -> r.deliveryCount().orElse((short) -1) == 1),
                "after the reset: " + again.values());
        }
        String oneLeft = shareGroups("--describe", "--offsets", "--group", group);
        check(hasRow(oneLeft, group, topic, "0", "0", "1"), "--describe --offsets, one released: " + oneLeft);
        // The member's leave is committed before its close returns; --delete needs none.
        String deleted = shareGroups("--delete", "--group", group);
        check(deleted.contains(group) && !deleted.toLowerCase().contains("error"), "--delete: " + deleted);
        String after = shareGroups("--list");
        check(after.lines().noneMatch(l -> l.trim().equals(group)), "--list after --delete: " + after);
    }
}
