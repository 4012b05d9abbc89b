package dev.skua.compat;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.utils.Utils;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/** Java producer -> broker -> Java consumer (assign + seekToBeginning, no group). */
@ExtendWith(CaseReporter.class)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ProduceConsumeTest {

    private static final long BASE_TS = 1_700_000_000_000L;

    private static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /**
     * Produces {@code n} records with keys, two headers and explicit timestamps to partition 0,
     * then reads them back and checks offsets, order, key, value, headers and timestamps exactly.
     */
    private void roundTrip(String what, int n, int valueSize, Map<String, Object> producerExtra) throws Exception {
        roundTrip(what, n, valueSize, producerExtra, Map.of());
    }

    /** As above, on a topic created with {@code topicConfigs}. */
    private void roundTrip(String what, int n, int valueSize, Map<String, Object> producerExtra,
                           Map<String, String> topicConfigs) throws Exception {
        String topic = Support.topicName(what);
        if (topicConfigs.isEmpty()) {
            Support.createTopic(topic, 1);
        } else {
            try (var admin = org.apache.kafka.clients.admin.Admin.create(Support.adminProps())) {
                admin.createTopics(List.of(new org.apache.kafka.clients.admin.NewTopic(topic, 1, (short) 1)
                        .configs(topicConfigs))).all().get(30, TimeUnit.SECONDS);
            }
        }
        try {
            Properties p = Support.producerProps();
            p.putAll(producerExtra);
            List<Future<RecordMetadata>> acks = new ArrayList<>();
            List<ProducerRecord<byte[], byte[]>> sent = new ArrayList<>();
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
                for (int i = 0; i < n; i++) {
                    byte[] value = new byte[valueSize];
                    byte[] prefix = b("value-" + i + "-");
                    // compressible but not constant payload
                    for (int j = 0; j < valueSize; j++) value[j] = (byte) ('a' + ((i + j / 7) % 26));
                    System.arraycopy(prefix, 0, value, 0, Math.min(prefix.length, valueSize));
                    List<Header> headers = List.of(
                            new RecordHeader("h-index", b(Integer.toString(i))),
                            new RecordHeader("h-empty", new byte[0]));
                    ProducerRecord<byte[], byte[]> r =
                            new ProducerRecord<>(topic, 0, BASE_TS + i, b("key-" + i), value, headers);
                    sent.add(r);
                    acks.add(producer.send(r));
                }
                producer.flush();
                long expectOffset = 0;
                for (Future<RecordMetadata> f : acks) {
                    RecordMetadata md = f.get(30, TimeUnit.SECONDS);
                    assertEquals(0, md.partition());
                    assertEquals(expectOffset++, md.offset(), "ack offsets must be dense and ordered");
                }
            }
            TopicPartition tp = new TopicPartition(topic, 0);
            List<ConsumerRecord<byte[], byte[]>> got = Support.readAll(tp, n,
                    Map.of(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, 2 * 1024 * 1024));
            assertEquals(n, got.size(), "records read back");
            for (int i = 0; i < n; i++) {
                ConsumerRecord<byte[], byte[]> r = got.get(i);
                ProducerRecord<byte[], byte[]> s = sent.get(i);
                assertEquals(i, r.offset(), "offset of record " + i);
                assertArrayEquals(s.key(), r.key(), "key of record " + i);
                assertArrayEquals(s.value(), r.value(), "value of record " + i);
                assertEquals(TimestampType.CREATE_TIME, r.timestampType(), "timestamp type of record " + i);
                assertEquals(s.timestamp().longValue(), r.timestamp(), "timestamp of record " + i);
                Header[] hs = r.headers().toArray();
                assertEquals(2, hs.length, "header count of record " + i);
                assertEquals("h-index", hs[0].key());
                assertArrayEquals(b(Integer.toString(i)), hs[0].value());
                assertEquals("h-empty", hs[1].key());
                assertTrue(hs[1].value() == null || hs[1].value().length == 0, "empty header value");
            }
        } finally {
            Support.deleteTopicQuietly(topic);
        }
    }

    @Test @DisplayName("java.client.produce_consume.none")
    void codecNone() throws Exception {
        roundTrip("none", 500, 100, Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, "none"));
    }

    @Test @DisplayName("java.client.produce_consume.gzip")
    void codecGzip() throws Exception {
        roundTrip("gzip", 500, 100, Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, "gzip"));
    }

    @Test @DisplayName("java.client.produce_consume.snappy")
    void codecSnappy() throws Exception {
        roundTrip("snappy", 500, 100, Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, "snappy"));
    }

    @Test @DisplayName("java.client.produce_consume.lz4")
    void codecLz4() throws Exception {
        roundTrip("lz4", 500, 100, Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4"));
    }

    @Test @DisplayName("java.client.produce_consume.zstd")
    void codecZstd() throws Exception {
        roundTrip("zstd", 500, 100, Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, "zstd"));
    }

    @Test @DisplayName("java.client.topic_compression_type")
    void topicCompressionType() throws Exception {
        // The topic's compression.type differs from the producer's: the broker re-encodes each
        // batch (Kafka's LogValidator does the same) and the consumer reads what was sent.
        for (String codec : List.of("gzip", "snappy", "lz4", "zstd")) {
            roundTrip("topic-" + codec, 300, 100, Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, "none"),
                    Map.of("compression.type", codec));
        }
        roundTrip("topic-uncompressed", 300, 100, Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4"),
                Map.of("compression.type", "uncompressed"));
    }

    @Test @DisplayName("java.client.acks_all_idempotent")
    void acksAllIdempotent() throws Exception {
        // the 4.x default: enable.idempotence=true, acks=all, 5 in flight, tiny batches
        roundTrip("idem", 2000, 50, Map.of(
                ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true,
                ProducerConfig.ACKS_CONFIG, "all",
                ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, 5,
                ProducerConfig.BATCH_SIZE_CONFIG, 1024,
                ProducerConfig.LINGER_MS_CONFIG, 0));
    }

    @Test @DisplayName("java.client.acks1")
    void acksOne() throws Exception {
        roundTrip("acks1", 500, 100, Map.of(
                ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, false,
                ProducerConfig.ACKS_CONFIG, "1"));
    }

    @Test @DisplayName("java.client.acks0")
    void acksZero() throws Exception {
        String topic = Support.topicName("acks0");
        Support.createTopic(topic, 1);
        try {
            Properties p = Support.producerProps();
            p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, false);
            p.put(ProducerConfig.ACKS_CONFIG, "0");
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
                for (int i = 0; i < 100; i++) producer.send(new ProducerRecord<>(topic, 0, b("k" + i), b("v" + i)));
                producer.flush();
            }
            List<ConsumerRecord<byte[], byte[]>> got = Support.readAll(new TopicPartition(topic, 0), 100, null);
            assertEquals(100, got.size());
            for (int i = 0; i < 100; i++) assertArrayEquals(b("v" + i), got.get(i).value());
        } finally {
            Support.deleteTopicQuietly(topic);
        }
    }

    @Test @DisplayName("java.client.large_records")
    void largeRecords() throws Exception {
        // ~1,000,000-byte values: just under the default max.message.bytes (1048588)
        roundTrip("large", 4, 1_000_000, Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, "none"));
    }

    @Test @DisplayName("java.client.large_batches")
    void largeBatches() throws Exception {
        // many small records packed into ~1 MB batches
        roundTrip("batches", 20000, 200, Map.of(
                ProducerConfig.BATCH_SIZE_CONFIG, 1_000_000,
                ProducerConfig.LINGER_MS_CONFIG, 50,
                ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4"));
    }

    /**
     * Fetch limits below one batch (KIP-74): partition p of a four-partition topic holds p
     * uncompressed batches of 64 records of 1000 bytes (about 64 KiB each), then a batch of
     * one small record. The consumer's {@code extra} limits are 1 KiB, so almost no batch
     * fits them: the broker must still return the first partition's first batch whole and
     * never a cut-off piece of a batch as a partition's only content, which the Java
     * consumer rejects ("Received a non-empty fetch response from the server, but no
     * complete records were found"). Every record must be read, in order, none twice.
     */
    private void fetchBelowBatch(String what, Map<String, Object> extra) throws Exception {
        int parts = 4, perBatch = 64, valueSize = 1000;
        String topic = Support.topicName(what);
        Support.createTopic(topic, parts);
        try {
            Properties p = Support.producerProps();
            // nothing is sent before flush(): each flush makes one batch per partition
            p.put(ProducerConfig.BATCH_SIZE_CONFIG, 1 << 20);
            p.put(ProducerConfig.LINGER_MS_CONFIG, 10_000);
            p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "none");
            List<List<byte[]>> sent = new ArrayList<>();
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
                List<Future<RecordMetadata>> acks = new ArrayList<>();
                for (int part = 0; part < parts; part++) sent.add(new ArrayList<>());
                // big batches first, one round per flush; then each partition's small last
                // batch, which leaves most of a 1 KiB fetch.max.bytes to the next partition
                for (int round = 0; round <= parts; round++) {
                    for (int part = 0; part < parts; part++) {
                        int n = round < part ? perBatch : round == parts ? 1 : 0;
                        for (int i = 0; i < n; i++) {
                            int index = sent.get(part).size();
                            byte[] value = new byte[round == parts ? 100 : valueSize];
                            Arrays.fill(value, (byte) ('a' + (index + part) % 26));
                            byte[] prefix = b("p" + part + "-" + index + "-");
                            System.arraycopy(prefix, 0, value, 0, prefix.length);
                            sent.get(part).add(value);
                            acks.add(producer.send(new ProducerRecord<>(topic, part, b("k" + index), value)));
                        }
                    }
                    producer.flush();
                }
                for (Future<RecordMetadata> f : acks) f.get(30, TimeUnit.SECONDS);
                // the premise: the batches on the broker really are ~64 KiB
                double maxBatch = producer.metrics().entrySet().stream()
                        .filter(e -> e.getKey().name().equals("batch-size-max")
                                && e.getKey().group().equals("producer-metrics"))
                        .mapToDouble(e -> ((Number) e.getValue().metricValue()).doubleValue())
                        .max().orElse(0);
                assertTrue(maxBatch >= perBatch * valueSize, "largest batch sent: " + maxBatch + " bytes");
            }
            int total = sent.stream().mapToInt(List::size).sum();
            Properties cp = Support.consumerProps();
            cp.putAll(extra);
            List<List<ConsumerRecord<byte[], byte[]>>> got = new ArrayList<>();
            for (int part = 0; part < parts; part++) got.add(new ArrayList<>());
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cp)) {
                List<TopicPartition> tps = new ArrayList<>();
                for (int part = 0; part < parts; part++) tps.add(new TopicPartition(topic, part));
                c.assign(tps);
                c.seekToBeginning(tps);
                int read = 0;
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (read < total && System.nanoTime() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                        got.get(r.partition()).add(r);
                        read++;
                    }
                }
                // one more short poll to catch records read twice
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(300))) got.get(r.partition()).add(r);
            }
            for (int part = 0; part < parts; part++) {
                List<ConsumerRecord<byte[], byte[]>> rs = got.get(part);
                assertEquals(sent.get(part).size(), rs.size(), "records read from partition " + part);
                for (int i = 0; i < rs.size(); i++) {
                    assertEquals(i, rs.get(i).offset(), "offset of record " + i + " of partition " + part);
                    assertArrayEquals(sent.get(part).get(i), rs.get(i).value(),
                            "value of record " + i + " of partition " + part);
                }
            }
        } finally {
            Support.deleteTopicQuietly(topic);
        }
    }

    @Test @DisplayName("java.client.fetch_below_batch.max_partition_fetch_bytes")
    void fetchBelowBatchPartitionLimit() throws Exception {
        fetchBelowBatch("fetch-part", Map.of(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, 1024));
    }

    @Test @DisplayName("java.client.fetch_below_batch.fetch_max_bytes")
    void fetchBelowBatchRequestLimit() throws Exception {
        fetchBelowBatch("fetch-max", Map.of(ConsumerConfig.FETCH_MAX_BYTES_CONFIG, 1024));
    }

    @Test @DisplayName("java.client.null_key_and_value")
    void nullKeyAndValue() throws Exception {
        String topic = Support.topicName("nulls");
        Support.createTopic(topic, 1);
        try {
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(Support.producerProps())) {
                producer.send(new ProducerRecord<>(topic, 0, null, b("no-key"))).get(30, TimeUnit.SECONDS);
                producer.send(new ProducerRecord<>(topic, 0, b("tombstone"), null)).get(30, TimeUnit.SECONDS);
                producer.send(new ProducerRecord<>(topic, 0, b(""), new byte[0])).get(30, TimeUnit.SECONDS);
            }
            List<ConsumerRecord<byte[], byte[]>> got = Support.readAll(new TopicPartition(topic, 0), 3, null);
            assertEquals(3, got.size());
            assertNull(got.get(0).key());
            assertArrayEquals(b("no-key"), got.get(0).value());
            assertArrayEquals(b("tombstone"), got.get(1).key());
            assertNull(got.get(1).value());
            assertArrayEquals(new byte[0], got.get(2).key());
            assertArrayEquals(new byte[0], got.get(2).value());
        } finally {
            Support.deleteTopicQuietly(topic);
        }
    }

    @Test @DisplayName("java.client.keyed_partitioning")
    void keyedPartitioning() throws Exception {
        // the Java client's default partitioner: murmur2(key) % partitions; every record with
        // the same key must land (and be read back) in that partition, in order
        int parts = 6;
        String topic = Support.topicName("keyed");
        Support.createTopic(topic, parts);
        try {
            int keys = 30, perKey = 10;
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(Support.producerProps())) {
                List<Future<RecordMetadata>> acks = new ArrayList<>();
                List<Integer> expected = new ArrayList<>();
                for (int round = 0; round < perKey; round++) {
                    for (int k = 0; k < keys; k++) {
                        byte[] key = b("user-" + k);
                        expected.add(Utils.toPositive(Utils.murmur2(key)) % parts);
                        acks.add(producer.send(new ProducerRecord<>(topic, key, b(k + ":" + round))));
                    }
                }
                for (int i = 0; i < acks.size(); i++) {
                    assertEquals(expected.get(i), acks.get(i).get(30, TimeUnit.SECONDS).partition(),
                            "partition of record " + i);
                }
            }
            int total = 0;
            for (int part = 0; part < parts; part++) {
                List<Integer> perKeyKeysInPart = new ArrayList<>();
                for (int k = 0; k < keys; k++) {
                    if (Utils.toPositive(Utils.murmur2(b("user-" + k))) % parts == part) perKeyKeysInPart.add(k);
                }
                int n = perKeyKeysInPart.size() * perKey;
                List<ConsumerRecord<byte[], byte[]>> got = Support.readAll(new TopicPartition(topic, part), n, null);
                assertEquals(n, got.size(), "records in partition " + part);
                int[] nextRound = new int[keys];
                for (ConsumerRecord<byte[], byte[]> r : got) {
                    String[] kv = new String(r.value(), StandardCharsets.UTF_8).split(":");
                    int k = Integer.parseInt(kv[0]);
                    assertTrue(perKeyKeysInPart.contains(k), "key " + k + " in wrong partition " + part);
                    assertEquals(nextRound[k]++, Integer.parseInt(kv[1]), "per-key order");
                }
                total += got.size();
            }
            assertEquals(keys * perKey, total);
        } finally {
            Support.deleteTopicQuietly(topic);
        }
    }

    @Test @DisplayName("java.client.log_append_time")
    void logAppendTime() throws Exception {
        String topic = Support.topicName("lat");
        try (var admin = org.apache.kafka.clients.admin.Admin.create(Support.adminProps())) {
            admin.createTopics(List.of(new org.apache.kafka.clients.admin.NewTopic(topic, 1, (short) 1)
                    .configs(Map.of("message.timestamp.type", "LogAppendTime")))).all().get(30, TimeUnit.SECONDS);
        }
        try {
            long before = System.currentTimeMillis();
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(Support.producerProps())) {
                RecordMetadata md = producer.send(new ProducerRecord<>(topic, 0, 12345L, b("k"), b("v")))
                        .get(30, TimeUnit.SECONDS);
                assertTrue(md.timestamp() >= before - 5000, "ack carries the log append time");
            }
            List<ConsumerRecord<byte[], byte[]>> got = Support.readAll(new TopicPartition(topic, 0), 1, null);
            assertEquals(1, got.size());
            assertEquals(TimestampType.LOG_APPEND_TIME, got.get(0).timestampType());
            assertTrue(got.get(0).timestamp() >= before - 5000, "broker replaced the create time");
        } finally {
            Support.deleteTopicQuietly(topic);
        }
    }

    @Test @DisplayName("java.client.seek_to_offset")
    void seekToOffset() throws Exception {
        String topic = Support.topicName("seek");
        Support.createTopic(topic, 1);
        try {
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(Support.producerProps())) {
                for (int i = 0; i < 100; i++) producer.send(new ProducerRecord<>(topic, 0, null, b("v" + i)));
                producer.flush();
            }
            TopicPartition tp = new TopicPartition(topic, 0);
            try (var c = new org.apache.kafka.clients.consumer.KafkaConsumer<byte[], byte[]>(Support.consumerProps())) {
                c.assign(List.of(tp));
                c.seek(tp, 57);
                List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (got.size() < 43 && System.nanoTime() < deadline) {
                    c.poll(java.time.Duration.ofMillis(300)).forEach(got::add);
                }
                assertEquals(43, got.size());
                assertEquals(57, got.get(0).offset());
                assertArrayEquals(b("v57"), got.get(0).value());
                assertEquals(100, c.position(tp));
                assertEquals(Long.valueOf(100), c.endOffsets(List.of(tp)).get(tp));
                assertEquals(Long.valueOf(0), c.beginningOffsets(List.of(tp)).get(tp));
                assertTrue(Arrays.asList(got.get(42).offset()).contains(99L));
            }
        } finally {
            Support.deleteTopicQuietly(topic);
        }
    }
}
