package main

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sendOffsets puts a group's offset for the txn topic into the open transaction, as a
// consume-transform-produce loop does: AddOffsetsToTxn to the transaction coordinator,
// then TxnOffsetCommit to the group coordinator (generation -1: a group with no members).
func sendOffsets(ctx context.Context, p *kgo.Client, topic string, offset int64) error {
	if pin != nil {
		if v, ok := pin.LookupMaxKeyVersion(25); !ok || v < 0 {
			return nil // the pinned release has no AddOffsetsToTxn
		}
	}
	id, epoch, err := p.ProducerID(ctx)
	if err != nil {
		return err
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID = prefix + "txn-id"
	add.ProducerID = id
	add.ProducerEpoch = epoch
	add.Group = prefix + "txn-group"
	addResp, err := add.RequestWith(ctx, p)
	if err != nil {
		return err
	}
	if err := kerrOf(addResp.ErrorCode); err != nil {
		return fmt.Errorf("AddOffsetsToTxn: %w", err)
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID = prefix + "txn-id"
	commit.Group = prefix + "txn-group"
	commit.ProducerID = id
	commit.ProducerEpoch = epoch
	commit.Generation = -1
	t := kmsg.NewTxnOffsetCommitRequestTopic()
	t.Topic = topic
	part := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	part.Partition = 0
	part.Offset = offset
	part.LeaderEpoch = -1
	t.Partitions = append(t.Partitions, part)
	commit.Topics = append(commit.Topics, t)
	commitResp, err := commit.RequestWith(ctx, p)
	if err != nil {
		return err
	}
	for _, t := range commitResp.Topics {
		for _, part := range t.Partitions {
			if err := kerrOf(part.ErrorCode); err != nil {
				return fmt.Errorf("TxnOffsetCommit: %w", err)
			}
		}
	}
	return nil
}

func kerrOf(code int16) error {
	if code == 0 {
		return nil
	}
	return fmt.Errorf("error code %d", code)
}

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
			if err := sendOffsets(ctx, p, topic, 3); err != nil {
				return err
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
