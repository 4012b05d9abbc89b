// Command sarama runs skua's compatibility cases for IBM/sarama: produce with every
// codec, partition consumer from the oldest offset (no group), offsets, admin topics,
// and (expected to fail until skua has groups) a consumer-group case.
//
//	go run ./sarama -bootstrap 127.0.0.1:9092
//
// Prints one `PASS id` / `FAIL id: reason` line per case.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

var bootstrap = flag.String("bootstrap", "127.0.0.1:9092", "broker host:port")

func config() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V3_6_0_0
	c.ClientID = "skua-compat-sarama"
	c.Net.DialTimeout = 10 * time.Second
	c.Net.ReadTimeout = 20 * time.Second
	c.Metadata.Retry.Max = 10
	c.Metadata.Retry.Backoff = 200 * time.Millisecond
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Consumer.Return.Errors = true
	return c
}

func topicName(what string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "compat-sarama-" + what + "-" + hex.EncodeToString(b)
}

func withAdmin(f func(sarama.ClusterAdmin) error) error {
	a, err := sarama.NewClusterAdmin([]string{*bootstrap}, config())
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	defer a.Close()
	return f(a)
}

func createTopic(name string, parts int32) error {
	return withAdmin(func(a sarama.ClusterAdmin) error {
		if err := a.CreateTopic(name, &sarama.TopicDetail{NumPartitions: parts, ReplicationFactor: 1}, false); err != nil {
			return fmt.Errorf("create topic: %w", err)
		}
		return nil
	})
}

func deleteTopic(name string) { _ = withAdmin(func(a sarama.ClusterAdmin) error { return a.DeleteTopic(name) }) }

// produceConsume sends n keyed records with headers and timestamps using codec, then reads
// them back with a partition consumer from the oldest offset and compares every field.
func produceConsume(codec sarama.CompressionCodec, idempotent bool) error {
	topic := topicName(codec.String())
	if err := createTopic(topic, 1); err != nil {
		return err
	}
	defer deleteTopic(topic)
	cfg := config()
	cfg.Producer.Compression = codec
	if idempotent {
		cfg.Producer.Idempotent = true
		cfg.Net.MaxOpenRequests = 1
	}
	const n = 300
	base := time.UnixMilli(1_700_000_000_000)
	client, err := sarama.NewClient([]string{*bootstrap}, cfg)
	if err != nil {
		return err
	}
	defer client.Close()
	// wait for the new topic to have a leader in this client's metadata
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err = client.Leader(topic, 0); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no leader for %s/0: %w", topic, err)
		}
		_ = client.RefreshMetadata(topic)
		time.Sleep(200 * time.Millisecond)
	}
	prod, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		return err
	}
	msgs := make([]*sarama.ProducerMessage, n)
	for i := range msgs {
		msgs[i] = &sarama.ProducerMessage{
			Topic:     topic,
			Partition: 0,
			Key:       sarama.StringEncoder(fmt.Sprintf("key-%d", i)),
			Value:     sarama.ByteEncoder(bytes.Repeat([]byte(fmt.Sprintf("value-%d;", i)), 10)),
			Headers:   []sarama.RecordHeader{{Key: []byte("h"), Value: []byte(fmt.Sprint(i))}},
			Timestamp: base.Add(time.Duration(i) * time.Millisecond),
		}
	}
	if err := prod.SendMessages(msgs[:n/2]); err != nil {
		return fmt.Errorf("send batch: %w", err)
	}
	for _, m := range msgs[n/2:] {
		if _, _, err := prod.SendMessage(m); err != nil {
			return fmt.Errorf("send: %w", err)
		}
	}
	if err := prod.Close(); err != nil {
		return err
	}
	cons, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return err
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		return fmt.Errorf("consume partition: %w", err)
	}
	defer pc.Close()
	timeout := time.After(30 * time.Second)
	for i := 0; i < n; i++ {
		select {
		case m := <-pc.Messages():
			want := msgs[i]
			wk, _ := want.Key.Encode()
			wv, _ := want.Value.Encode()
			switch {
			case m.Offset != int64(i):
				return fmt.Errorf("record %d: offset %d", i, m.Offset)
			case !bytes.Equal(m.Key, wk):
				return fmt.Errorf("record %d: key %q", i, m.Key)
			case !bytes.Equal(m.Value, wv):
				return fmt.Errorf("record %d: value mismatch", i)
			case len(m.Headers) != 1 || string(m.Headers[0].Key) != "h" || string(m.Headers[0].Value) != fmt.Sprint(i):
				return fmt.Errorf("record %d: headers %v", i, m.Headers)
			case !m.Timestamp.Equal(want.Timestamp):
				return fmt.Errorf("record %d: timestamp %v want %v", i, m.Timestamp, want.Timestamp)
			}
		case err := <-pc.Errors():
			return fmt.Errorf("consumer: %w", err)
		case <-timeout:
			return fmt.Errorf("timed out after %d of %d records", i, n)
		}
	}
	return nil
}

func offsets() error {
	topic := topicName("offsets")
	if err := createTopic(topic, 1); err != nil {
		return err
	}
	defer deleteTopic(topic)
	cfg := config()
	client, err := sarama.NewClient([]string{*bootstrap}, cfg)
	if err != nil {
		return err
	}
	defer client.Close()
	prod, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		return err
	}
	for i := 0; i < 7; i++ {
		if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("x")}); err != nil {
			return err
		}
	}
	_ = prod.Close()
	newest, err := client.GetOffset(topic, 0, sarama.OffsetNewest)
	if err != nil || newest != 7 {
		return fmt.Errorf("newest offset %d (%v), want 7", newest, err)
	}
	oldest, err := client.GetOffset(topic, 0, sarama.OffsetOldest)
	if err != nil || oldest != 0 {
		return fmt.Errorf("oldest offset %d (%v), want 0", oldest, err)
	}
	return nil
}

func adminTopics() error {
	topic := topicName("admin")
	return withAdmin(func(a sarama.ClusterAdmin) error {
		if err := a.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false); err != nil {
			return fmt.Errorf("create: %w", err)
		}
		err := a.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false)
		if !errors.Is(err, sarama.ErrTopicAlreadyExists) {
			return fmt.Errorf("second create: got %v, want ErrTopicAlreadyExists", err)
		}
		md, err := a.DescribeTopics([]string{topic})
		if err != nil || len(md) != 1 || len(md[0].Partitions) != 3 {
			return fmt.Errorf("describe: %v %v", md, err)
		}
		for _, p := range md[0].Partitions {
			if p.Leader < 0 || len(p.Replicas) != 1 || len(p.Isr) != 1 {
				return fmt.Errorf("partition %d: leader %d replicas %v isr %v", p.ID, p.Leader, p.Replicas, p.Isr)
			}
		}
		topics, err := a.ListTopics()
		if err != nil {
			return err
		}
		if d, ok := topics[topic]; !ok || d.NumPartitions != 3 {
			return fmt.Errorf("list topics: %v", d)
		}
		if err := a.DeleteTopic(topic); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		return nil
	})
}

type handler struct {
	mu   sync.Mutex
	seen map[string]bool
	want int
	done chan struct{}
	once sync.Once
}

func (h *handler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *handler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		s.MarkMessage(m, "")
		h.mu.Lock()
		h.seen[string(m.Value)] = true
		if len(h.seen) >= h.want {
			h.once.Do(func() { close(h.done) })
		}
		h.mu.Unlock()
	}
	return nil
}

func group() error {
	topic := topicName("group")
	if err := createTopic(topic, 2); err != nil {
		return err
	}
	defer deleteTopic(topic)
	cfg := config()
	cfg.Producer.Partitioner = sarama.NewHashPartitioner
	prod, err := sarama.NewSyncProducer([]string{*bootstrap}, cfg)
	if err != nil {
		return err
	}
	for i := 0; i < 20; i++ {
		if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic,
			Key: sarama.StringEncoder(fmt.Sprint(i)), Value: sarama.StringEncoder(fmt.Sprint("v", i))}); err != nil {
			return err
		}
	}
	_ = prod.Close()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cg, err := sarama.NewConsumerGroup([]string{*bootstrap}, topicName("g"), cfg)
	if err != nil {
		return err
	}
	defer cg.Close()
	h := &handler{seen: map[string]bool{}, want: 20, done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, h); err != nil {
				errc <- err
				return
			}
		}
	}()
	select {
	case <-h.done:
		return nil
	case err := <-errc:
		return err
	case <-ctx.Done():
		h.mu.Lock()
		defer h.mu.Unlock()
		return fmt.Errorf("timed out with %d of 20 records", len(h.seen))
	}
}

func run(id string, f func() error) {
	done := make(chan error, 1)
	go func() { done <- f() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(90 * time.Second):
		err = errors.New("case timed out after 90s")
	}
	if err != nil {
		fmt.Printf("FAIL %s: %s\n", id, strings.ReplaceAll(err.Error(), "\n", " "))
	} else {
		fmt.Printf("PASS %s\n", id)
	}
}

func main() {
	flag.Parse()
	sarama.Logger = nopLogger{}
	for _, c := range []sarama.CompressionCodec{sarama.CompressionNone, sarama.CompressionGZIP,
		sarama.CompressionSnappy, sarama.CompressionLZ4, sarama.CompressionZSTD} {
		c := c
		run("sarama.produce_consume."+c.String(), func() error { return produceConsume(c, false) })
	}
	run("sarama.idempotent.zstd", func() error { return produceConsume(sarama.CompressionZSTD, true) })
	run("sarama.offsets", offsets)
	run("sarama.admin.topics", adminTopics)
	run("sarama.group.consume", group)
	os.Exit(0)
}

type nopLogger struct{}

func (nopLogger) Print(...interface{})          {}
func (nopLogger) Printf(string, ...interface{}) {}
func (nopLogger) Println(...interface{})        {}
