// A Kafka Streams word count, as the Streams quickstart writes it, run unchanged against
// the broker under test: at_least_once, a repartition topic (groupBy) and a compacted
// changelog (the count's store). It runs until the output topic holds the expected count
// of every word (read back by a plain consumer), then closes cleanly. While it reads, it
// prints `progress N` whenever its reader has seen N output records in all (committed ones
// only, under exactly_once_v2), so a test can tell when the application has made progress.
// A stream thread that dies prints `stream thread died: EXCEPTION` and ends the run (exit 1).
//   java -cp 'LIBS/*' WordCount.java BOOTSTRAP APP_ID INPUT OUTPUT STATE_DIR SECONDS word=count...
import java.time.Duration;
import java.util.*;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;
import org.apache.kafka.streams.*;
import org.apache.kafka.streams.kstream.*;

public class WordCount {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], appId = args[1], input = args[2], output = args[3], stateDir = args[4];
        long deadline = System.currentTimeMillis() + Long.parseLong(args[5]) * 1000;
        Map<String, Long> expected = new TreeMap<>();
        for (int i = 6; i < args.length; i++) {
            String[] kv = args[i].split("=");
            expected.put(kv[0], Long.parseLong(kv[1]));
        }

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        // -Dguarantee=exactly_once_v2 runs the same topology in transactions.
        String guarantee = System.getProperty("guarantee", StreamsConfig.AT_LEAST_ONCE);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 500);
        props.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, 1000);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        // -DmaxPartitionFetchBytes=N: the application's consumers (main and restore) fetch at
        // most N bytes a partition, and its producer writes batches of up to 256 KiB, so that
        // batches of the repartition topic exceed the limit as well as the input's (KIP-74: a
        // fetch still returns its first batch whole, and the consumer must make progress).
        String fetchLimit = System.getProperty("maxPartitionFetchBytes");
        if (fetchLimit != null) {
            props.put(StreamsConfig.consumerPrefix(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG),
                Integer.parseInt(fetchLimit));
            props.put(StreamsConfig.producerPrefix(ProducerConfig.BATCH_SIZE_CONFIG), 256 * 1024);
            props.put(StreamsConfig.producerPrefix(ProducerConfig.LINGER_MS_CONFIG), 1000);
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(input)
            .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
            .filter((k, word) -> !word.isEmpty())
            .groupBy((k, word) -> word)
            .count(Materialized.as("counts"))
            .toStream()
            .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        AtomicReference<Throwable> died = new AtomicReference<>();
        try (KafkaStreams streams = new KafkaStreams(builder.build(), props)) {
            streams.setUncaughtExceptionHandler(e -> {
                e.printStackTrace();
                died.compareAndSet(null, e);
                return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
            });
            streams.start();
            boolean committedOnly = !guarantee.equals(StreamsConfig.AT_LEAST_ONCE);
            Map<String, Long> seen = readCounts(bootstrap, output, expected, deadline, committedOnly, died);
            if (died.get() != null) {
                // the client shuts down: no count would change any more
                System.out.println("stream thread died: " + died.get());
                System.exit(1);
            }
            if (!seen.equals(expected)) {
                System.out.println("counts: want " + expected + ", got " + seen + " (state " + streams.state() + ")");
                System.exit(1);
            }
            streams.close(Duration.ofSeconds(30));
        }
        System.out.println("counts ok: " + expected);
    }

    /** The latest count of every word in the output topic, read until it is `expected` or a thread died. */
    static Map<String, Long> readCounts(String bootstrap, String topic, Map<String, Long> expected, long deadline,
                                        boolean committedOnly, AtomicReference<Throwable> died) {
        Properties p = new Properties();
        if (committedOnly) {
            p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        }
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, LongDeserializer.class);
        Map<String, Long> seen = new TreeMap<>();
        try (KafkaConsumer<String, Long> consumer = new KafkaConsumer<>(p)) {
            List<TopicPartition> parts = new ArrayList<>();
            while (parts.isEmpty() && System.currentTimeMillis() < deadline) {
                consumer.partitionsFor(topic).forEach(i -> parts.add(new TopicPartition(topic, i.partition())));
            }
            consumer.assign(parts);
            consumer.seekToBeginning(parts);
            long read = 0;
            while (!seen.equals(expected) && died.get() == null && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, Long> records = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<String, Long> r : records) {
                    seen.put(r.key(), r.value());
                }
                if (!records.isEmpty()) {
                    read += records.count();
                    System.out.println("progress " + read);
                    System.out.flush();
                }
            }
        }
        return seen;
    }
}
