package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fetchBelowBatch: fetch limits below one batch (KIP-74). Partition p of a topic of
// four holds p uncompressed batches of 64 records of 1000 bytes (about 64 KiB each),
// then a batch of one small record, and one client consumes all four with limit, a
// fetch size of 1 KiB. The broker must return the first partition's first batch whole
// and never a cut-off piece of a batch as a partition's only content, which franz-go
// can only fetch again from the same offset; every record is read, in order, none twice.
func fetchBelowBatch(limit kgo.Opt) func() error {
	return func() error {
		const parts, perBatch = 4, 64
		cl, err := kgo.NewClient(kgo.SeedBrokers(*bootstrap), kgo.ClientID("skua-compat-franz"),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchCompression(kgo.NoCompression()),
			// nothing is sent before Flush: each flush makes one batch per partition
			kgo.ProducerLinger(10*time.Second))
		if err != nil {
			return err
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		topic := name("fetch-below-batch")
		if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
			return fmt.Errorf("create topic: %w", err)
		}
		defer func() { _, _ = adm.DeleteTopics(context.Background(), topic) }()

		// Big batches first, one round per flush; then each partition's small last
		// batch, which leaves most of a 1 KiB request limit to the next partition.
		sent := make([][][]byte, parts)
		for round := 0; round <= parts; round++ {
			var results []chan error
			for p := int32(0); p < parts; p++ {
				n, size := 0, 1000
				if round < int(p) {
					n = perBatch
				} else if round == parts {
					n, size = 1, 100
				}
				for range n {
					i := len(sent[p])
					value := bytes.Repeat([]byte{byte('a' + (i+int(p))%26)}, size)
					copy(value, fmt.Sprintf("p%d-%d-", p, i))
					sent[p] = append(sent[p], value)
					done := make(chan error, 1)
					results = append(results, done)
					cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "k%d", i), Value: value},
						func(_ *kgo.Record, err error) { done <- err })
				}
			}
			if err := cl.Flush(ctx); err != nil {
				return fmt.Errorf("flush: %w", err)
			}
			for _, done := range results {
				if err := <-done; err != nil {
					return fmt.Errorf("produce: %w", err)
				}
			}
		}

		offsets := map[int32]kgo.Offset{}
		for p := int32(0); p < parts; p++ {
			offsets[p] = kgo.NewOffset().AtStart()
		}
		consumer, err := kgo.NewClient(kgo.SeedBrokers(*bootstrap), kgo.ClientID("skua-compat-franz"),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
			kgo.FetchMaxWait(500*time.Millisecond), limit)
		if err != nil {
			return err
		}
		defer consumer.Close()
		got := make([][]*kgo.Record, parts)
		total, read := 0, 0
		for _, s := range sent {
			total += len(s)
		}
		readCtx, readCancel := context.WithTimeout(ctx, 30*time.Second)
		defer readCancel()
		for read < total && readCtx.Err() == nil {
			fetches := consumer.PollFetches(readCtx)
			for _, e := range fetches.Errors() {
				if e.Err != readCtx.Err() {
					return fmt.Errorf("fetch %s[%d]: %w", e.Topic, e.Partition, e.Err)
				}
			}
			fetches.EachRecord(func(r *kgo.Record) {
				got[r.Partition] = append(got[r.Partition], r)
				read++
			})
		}
		for p := range got {
			if len(got[p]) != len(sent[p]) {
				return fmt.Errorf("partition %d: read %d of %d records (%d of %d in all)",
					p, len(got[p]), len(sent[p]), read, total)
			}
			for i, r := range got[p] {
				if r.Offset != int64(i) || !bytes.Equal(r.Value, sent[p][i]) {
					return fmt.Errorf("partition %d: record %d at offset %d differs", p, i, r.Offset)
				}
			}
		}
		return nil
	}
}
