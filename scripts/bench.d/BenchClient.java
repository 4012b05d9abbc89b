// Small Kafka-client helper for scripts/bench (compiled against the same kafka-clients
// jar as Apache Kafka's perf tools).
//
//   BenchClient create BOOTSTRAP TOPIC:PARTITIONS[:RF[:MIN_ISR]]...
//       creates the topics (replication factor RF, default 1; topic config
//       min.insync.replicas=MIN_ISR if given) with the Admin client and waits until every
//       partition has a leader and all its replicas in sync. With RF > 1 it first waits
//       until the cluster has RF brokers. Prints "create_ms=T": from the CreateTopics
//       request to every partition ready.
//   BenchClient consume BOOTSTRAP TOPIC RECORDS
//       group-less consumer: assign() all partitions, seekToBeginning(), poll until
//       RECORDS records are read. No group.id, so it needs no group coordinator. Prints
//       one line "records=N bytes=B ms=T" where T runs from the first poll() to the
//       poll() that returned the last record (like kafka-consumer-perf-test's fetch time).
//   BenchClient e2e BOOTSTRAP TOPIC RECORDS ACKS SIZE
//       Apache Kafka's EndToEndLatency loop (producer linger.ms=0, send().get(), then poll
//       until the record arrives; consumer fetch.max.wait.ms=0, assign() + seekToEnd()),
//       but without a group.id, so it needs no group coordinator, and with microsecond
//       resolution. Prints "avg_ms=A p50=.. p99=.. p999=.." in milliseconds.
//   BenchClient keyed BOOTSTRAP TOPIC RECORDS SIZE KEYS
//       producer (acks=1, linger.ms=5, batch.size=16384, uncompressed) of RECORDS records
//       of SIZE-byte values over KEYS keys, in turn; prints "records=N ms=T".
//   BenchClient config BOOTSTRAP TOPIC KEY=VALUE...
//       sets topic configs with IncrementalAlterConfigs (TOPIC group:NAME: the configs
//       of group NAME, e.g. share.auto.offset.reset=earliest).
//   BenchClient share-ack BOOTSTRAP TOPIC GROUP RECORDS CONSUMERS
//       CONSUMERS KafkaShareConsumers (one thread each) in share group GROUP, explicit
//       acknowledgement mode: each acknowledges every record a poll returned (ACCEPT),
//       then commitSync(), until the consumers together have RECORDS records. Prints
//       "records=N ms=T commits=K ack_p50=.. ack_p99=.." (ms; T from the first poll to the
//       last record's commit; an acknowledgement's time is commitSync(): ShareAcknowledge
//       to the partition's leader and back).
//   BenchClient txn BOOTSTRAP TOPIC RECORDS SIZE PER_TXN
//       transactional producer (a fresh transactional.id, acks=all with idempotence as
//       transactions require, linger.ms=5, batch.size=16384, uncompressed): after
//       initTransactions() and one warm-up transaction of PER_TXN records, RECORDS records
//       of SIZE bytes, committing every PER_TXN records. Prints "records=N ms=T txns=K
//       commit_p50=.. commit_p99=.." (ms; a commit's time is commitTransaction(), which
//       flushes the transaction's last batches and waits for EndTxn).
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class BenchClient {
  public static void main(String[] a) throws Exception {
    switch (a[0]) {
      case "create": create(a); break;
      case "consume": consume(a); break;
      case "e2e": e2e(a); break;
      case "keyed": keyed(a); break;
      case "config": config(a); break;
      case "txn": txn(a); break;
      case "share-ack": shareAck(a); break;
      default: throw new IllegalArgumentException(a[0]);
    }
  }

  static void create(String[] a) throws Exception {
    Properties p = new Properties();
    p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, a[1]);
    try (Admin admin = Admin.create(p)) {
      List<NewTopic> topics = new ArrayList<>();
      Map<String, Integer> want = new LinkedHashMap<>();
      int maxRf = 1;
      for (int i = 2; i < a.length; i++) {
        String[] tp = a[i].split(":");
        want.put(tp[0], Integer.parseInt(tp[1]));
        short rf = tp.length > 2 ? Short.parseShort(tp[2]) : 1;
        maxRf = Math.max(maxRf, rf);
        NewTopic t = new NewTopic(tp[0], Integer.parseInt(tp[1]), rf);
        if (tp.length > 3) t.configs(Map.of("min.insync.replicas", tp[3]));
        topics.add(t);
      }
      // brokers of a cluster that has just started register one by one
      long brokersDeadline = System.currentTimeMillis() + 60_000;
      while (admin.describeCluster().nodes().get().size() < maxRf) {
        if (System.currentTimeMillis() > brokersDeadline) throw new RuntimeException("fewer than " + maxRf + " brokers");
        Thread.sleep(100);
      }
      long t0 = System.nanoTime();
      admin.createTopics(topics).all().get();
      long deadline = System.currentTimeMillis() + 60_000;
      while (true) {
        boolean ok = true;
        try {
          for (TopicDescription d : admin.describeTopics(want.keySet()).allTopicNames().get().values()) {
            if (d.partitions().size() != want.get(d.name())) ok = false;
            for (TopicPartitionInfo pi : d.partitions())
              if (pi.leader() == null || pi.isr().size() < pi.replicas().size()) ok = false;
          }
        } catch (Exception e) {
          ok = false;
        }
        if (ok) break;
        if (System.currentTimeMillis() > deadline) throw new RuntimeException("topics not ready");
        Thread.sleep(50);
      }
      System.out.println("create_ms=" + (System.nanoTime() - t0) / 1_000_000);
    }
  }

  static void consume(String[] a) {
    String topic = a[2];
    long want = Long.parseLong(a[3]);
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a[1]);
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
      List<TopicPartition> tps = new ArrayList<>();
      for (PartitionInfo pi : c.partitionsFor(topic)) tps.add(new TopicPartition(topic, pi.partition()));
      c.assign(tps);
      c.seekToBeginning(tps);
      long n = 0, bytes = 0;
      long start = System.nanoTime(), end = start;
      long deadline = start + 120_000_000_000L;
      while (n < want && System.nanoTime() < deadline) {
        ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(500));
        for (ConsumerRecord<byte[], byte[]> r : rs) {
          n++;
          bytes += r.serializedValueSize() + Math.max(0, r.serializedKeySize());
        }
        end = System.nanoTime();
      }
      System.out.printf("records=%d bytes=%d ms=%.3f%n", n, bytes, (end - start) / 1e6);
      if (n < want) System.exit(1);
    }
  }

  static void e2e(String[] a) throws Exception {
    String topic = a[2];
    int n = Integer.parseInt(a[3]);
    int size = Integer.parseInt(a[5]);
    Properties cp = new Properties();
    cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a[1]);
    cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "latest");
    cp.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "0");
    cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    Properties pp = new Properties();
    pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a[1]);
    pp.put(ProducerConfig.LINGER_MS_CONFIG, "0");
    pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, String.valueOf(Long.MAX_VALUE));
    pp.put(ProducerConfig.ACKS_CONFIG, a[4]);
    pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, a[4].equals("all") ? "true" : "false");
    pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cp);
         KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(pp)) {
      List<TopicPartition> tps = new ArrayList<>();
      for (PartitionInfo pi : c.partitionsFor(topic)) tps.add(new TopicPartition(topic, pi.partition()));
      c.assign(tps);
      c.seekToEnd(tps);
      for (TopicPartition tp : tps) c.position(tp);
      Random rnd = new Random(0);
      long[] lat = new long[n];
      double total = 0;
      for (int i = 0; i < n; i++) {
        byte[] v = new byte[size];
        for (int j = 0; j < size; j++) v[j] = (byte) ('A' + rnd.nextInt(26));
        long begin = System.nanoTime();
        p.send(new ProducerRecord<>(topic, v)).get();
        Iterator<ConsumerRecord<byte[], byte[]>> it = c.poll(Duration.ofMillis(10_000)).iterator();
        while (!it.hasNext()) {
          if (System.nanoTime() - begin > 60_000_000_000L) throw new RuntimeException("record " + i + " not consumed in 60 s");
          it = c.poll(Duration.ofMillis(10_000)).iterator();
        }
        long el = System.nanoTime() - begin;
        ConsumerRecord<byte[], byte[]> r = it.next();
        if (!Arrays.equals(r.value(), v) || it.hasNext()) throw new RuntimeException("unexpected record");
        lat[i] = el;
        total += el;
      }
      Arrays.sort(lat);
      System.out.printf("avg_ms=%.4f p50=%.4f p99=%.4f p999=%.4f%n", total / n / 1e6,
          lat[(int) (n * 0.5)] / 1e6, lat[(int) (n * 0.99)] / 1e6, lat[(int) (n * 0.999)] / 1e6);
    }
  }

  static void keyed(String[] a) throws Exception {
    String topic = a[2];
    long n = Long.parseLong(a[3]);
    int size = Integer.parseInt(a[4]);
    int keys = Integer.parseInt(a[5]);
    Properties pp = new Properties();
    pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a[1]);
    pp.put(ProducerConfig.ACKS_CONFIG, "1");
    pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
    pp.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    pp.put(ProducerConfig.BATCH_SIZE_CONFIG, "16384");
    pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    byte[][] values = textValues(size);
    long start = System.nanoTime();
    try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(pp)) {
      for (long i = 0; i < n; i++) {
        byte[] key = String.format("k%08d", i % keys).getBytes();
        p.send(new ProducerRecord<>(topic, key, values[(int) (i % values.length)]));
      }
      p.flush();
    }
    System.out.printf("records=%d ms=%.3f%n", n, (System.nanoTime() - start) / 1e6);
  }

  /** 64 values of `size` random capital letters (compressible like text), the same every run. */
  static byte[][] textValues(int size) {
    Random rnd = new Random(0);
    byte[][] values = new byte[64][size];
    for (byte[] v : values) for (int j = 0; j < size; j++) v[j] = (byte) ('A' + rnd.nextInt(26));
    return values;
  }

  static void txn(String[] a) throws Exception {
    String topic = a[2];
    long n = Long.parseLong(a[3]);
    int size = Integer.parseInt(a[4]);
    int perTxn = Integer.parseInt(a[5]);
    Properties pp = new Properties();
    pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a[1]);
    pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "bench-txn-" + UUID.randomUUID());
    pp.put(ProducerConfig.ACKS_CONFIG, "all");
    pp.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    pp.put(ProducerConfig.BATCH_SIZE_CONFIG, "16384");
    pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    byte[][] values = textValues(size);
    List<Long> commits = new ArrayList<>();
    long start;
    long sent = 0;
    try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(pp)) {
      p.initTransactions();
      p.beginTransaction();
      for (int i = 0; i < perTxn; i++) p.send(new ProducerRecord<>(topic, values[i % values.length]));
      p.commitTransaction();
      start = System.nanoTime();
      while (sent < n) {
        p.beginTransaction();
        for (int i = 0; i < perTxn && sent < n; i++, sent++) {
          p.send(new ProducerRecord<>(topic, values[(int) (sent % values.length)]));
        }
        long c0 = System.nanoTime();
        p.commitTransaction();
        commits.add(System.nanoTime() - c0);
      }
    }
    double ms = (System.nanoTime() - start) / 1e6;
    Collections.sort(commits);
    double p50 = commits.get(commits.size() / 2) / 1e6;
    double p99 = commits.get(Math.min(commits.size() - 1, (int) (commits.size() * 0.99))) / 1e6;
    System.out.printf("records=%d ms=%.3f txns=%d commit_p50=%.3f commit_p99=%.3f%n",
        sent, ms, commits.size(), p50, p99);
  }

  static void config(String[] a) throws Exception {
    Properties p = new Properties();
    p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, a[1]);
    try (Admin admin = Admin.create(p)) {
      List<AlterConfigOp> ops = new ArrayList<>();
      for (int i = 3; i < a.length; i++) {
        String[] kv = a[i].split("=", 2);
        ops.add(new AlterConfigOp(new ConfigEntry(kv[0], kv[1]), AlterConfigOp.OpType.SET));
      }
      org.apache.kafka.common.config.ConfigResource r = a[2].startsWith("group:")
          ? new org.apache.kafka.common.config.ConfigResource(org.apache.kafka.common.config.ConfigResource.Type.GROUP, a[2].substring(6))
          : new org.apache.kafka.common.config.ConfigResource(org.apache.kafka.common.config.ConfigResource.Type.TOPIC, a[2]);
      admin.incrementalAlterConfigs(Map.of(r, ops)).all().get();
    }
  }

  static void shareAck(String[] a) throws Exception {
    String topic = a[2], group = a[3];
    long n = Long.parseLong(a[4]);
    int consumers = Integer.parseInt(a[5]);
    java.util.concurrent.atomic.AtomicLong got = new java.util.concurrent.atomic.AtomicLong();
    java.util.concurrent.atomic.AtomicLong first = new java.util.concurrent.atomic.AtomicLong(Long.MAX_VALUE);
    java.util.concurrent.atomic.AtomicLong last = new java.util.concurrent.atomic.AtomicLong();
    List<Long> acks = Collections.synchronizedList(new ArrayList<>());
    List<Throwable> failed = Collections.synchronizedList(new ArrayList<>());
    List<Thread> threads = new ArrayList<>();
    long deadline = System.currentTimeMillis() + 600_000;
    for (int c = 0; c < consumers; c++) {
      Thread t = new Thread(() -> {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a[1]);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put("share.acknowledgement.mode", "explicit");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        try (KafkaShareConsumer<byte[], byte[]> sc = new KafkaShareConsumer<>(p)) {
          sc.subscribe(List.of(topic));
          while (got.get() < n && System.currentTimeMillis() < deadline) {
            ConsumerRecords<byte[], byte[]> rs = sc.poll(Duration.ofMillis(200));
            if (rs.isEmpty()) continue;
            first.accumulateAndGet(System.nanoTime(), Math::min);
            for (ConsumerRecord<byte[], byte[]> r : rs) sc.acknowledge(r, AcknowledgeType.ACCEPT);
            long c0 = System.nanoTime();
            sc.commitSync();
            long c1 = System.nanoTime();
            acks.add(c1 - c0);
            got.addAndGet(rs.count());
            last.accumulateAndGet(c1, Math::max);
          }
        } catch (Throwable e) {
          failed.add(e);
        }
      });
      t.start();
      threads.add(t);
    }
    for (Thread t : threads) t.join();
    if (!failed.isEmpty()) throw new RuntimeException(failed.get(0));
    if (got.get() < n) throw new RuntimeException("read " + got.get() + " of " + n + " records");
    List<Long> sorted = new ArrayList<>(acks);
    Collections.sort(sorted);
    double p50 = sorted.get(sorted.size() / 2) / 1e6;
    double p99 = sorted.get(Math.min(sorted.size() - 1, (int) (sorted.size() * 0.99))) / 1e6;
    System.out.printf("records=%d ms=%.3f commits=%d ack_p50=%.3f ack_p99=%.3f%n",
        got.get(), (last.get() - first.get()) / 1e6, sorted.size(), p50, p99);
  }
}
