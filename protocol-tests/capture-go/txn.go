package main

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// txnSteps drives a transactional producer and a read_committed consumer: one
// transaction committed, one aborted (InitProducerId with a transactional id,
// FindCoordinator for it, AddPartitionsToTxn, EndTxn), then a read_committed fetch.
func txnSteps(adm *kadm.Client) {
	topic := prefix + "txn"
	step("create txn topic", func(ctx context.Context) error {
		r, err := adm.CreateTopics(ctx, 1, 1, nil, topic)
		if err == nil {
			err = r.Error()
		}
		return err
	})
	step("transactions", func(ctx context.Context) error {
		p, err := kgo.NewClient(opts(kgo.TransactionalID(prefix+"txn-id"),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
		if err != nil {
			return err
		}
		defer p.Close()
		for _, commit := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
			if err := p.BeginTransaction(); err != nil {
				return err
			}
			for i := 0; i < 3; i++ {
				r := &kgo.Record{Topic: topic, Partition: 0, Value: []byte(fmt.Sprint("txn-", commit, i))}
				if err := p.ProduceSync(ctx, r).FirstErr(); err != nil {
					return err
				}
			}
			if err := p.EndTransaction(ctx, commit); err != nil {
				return err
			}
		}
		return nil
	})
	step("transaction admin", func(ctx context.Context) error {
		if _, err := adm.ListTransactions(ctx, nil, nil); err != nil {
			return err
		}
		if _, err := adm.DescribeTransactions(ctx, prefix+"txn-id"); err != nil {
			return err
		}
		var s kadm.TopicsSet
		s.Add(topic, 0)
		_, err := adm.DescribeProducers(ctx, s)
		return err
	})
	step("read committed", func(ctx context.Context) error {
		c, err := kgo.NewClient(opts(kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))...)
		if err != nil {
			return err
		}
		defer c.Close()
		got := 0
		for got < 3 && ctx.Err() == nil {
			fs := c.PollFetches(ctx)
			got += fs.NumRecords()
		}
		fmt.Println("read committed", got)
		return nil
	})
}
