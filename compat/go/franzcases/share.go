package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareConsumer: franz-go's share consumer (kgo.ShareGroup, KIP-932) reads a
// one-partition topic of 200 records in a share group whose share.auto.offset.reset is
// earliest. The first record it gets is released (Record.Ack(AckRelease)) and must come
// back with delivery count 2; the second is rejected (AckReject) and must never come
// back; every other record is accepted, explicitly or by the next poll, and must come
// exactly once with delivery count 1. The broker's answers to every acknowledgement
// reach ShareAckCallback and must carry no error. Then the client leaves, and a second
// member of the group must get nothing: nothing was left to deliver.
func shareConsumer() error {
	const total = 200
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(*bootstrap), kgo.ClientID("skua-compat-franz"))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topic, group := name("share"), name("share-group")
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	defer func() { _, _ = adm.DeleteTopics(context.Background(), topic) }()
	if err := setGroupConfig(ctx, cl, group, "share.auto.offset.reset", "earliest"); err != nil {
		return err
	}
	if err := produce(cl, topic, "s", total); err != nil {
		return fmt.Errorf("produce: %w", err)
	}

	var ackMu sync.Mutex
	var ackErrs []string
	acked := 0
	member := func() (*kgo.Client, error) {
		return kgo.NewClient(kgo.SeedBrokers(*bootstrap), kgo.ClientID("skua-compat-franz-share"),
			kgo.ConsumeTopics(topic), kgo.ShareGroup(group), kgo.FetchMaxWait(500*time.Millisecond),
			kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
				ackMu.Lock()
				defer ackMu.Unlock()
				acked++
				for _, r := range rs {
					if r.Err != nil {
						ackErrs = append(ackErrs, fmt.Sprintf("%s[%d]: %v", r.Topic, r.Partition, r.Err))
					}
				}
			}))
	}
	sc, err := member()
	if err != nil {
		return err
	}
	defer sc.Close()

	// value -> delivery counts seen, in order
	seen := map[string][]int32{}
	released, rejected := "", ""
	done := func() bool {
		if len(seen) < total-1 || released == "" || len(seen[released]) < 2 {
			return false
		}
		return true
	}
	readCtx, readCancel := context.WithTimeout(ctx, 45*time.Second)
	defer readCancel()
	for !done() && readCtx.Err() == nil {
		fetches := sc.PollFetches(readCtx)
		for _, e := range fetches.Errors() {
			if e.Err != readCtx.Err() {
				return fmt.Errorf("share fetch %s[%d]: %w", e.Topic, e.Partition, e.Err)
			}
		}
		fetches.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			seen[v] = append(seen[v], r.DeliveryCount())
			switch {
			case released == "":
				released = v
				r.Ack(kgo.AckRelease)
			case rejected == "" && v != released:
				rejected = v
				r.Ack(kgo.AckReject)
			default:
				r.Ack(kgo.AckAccept)
			}
		})
		// a flush after each poll, so the RELEASE reaches the broker while the others wait
		if err := sc.FlushAcks(readCtx); err != nil && readCtx.Err() == nil {
			return fmt.Errorf("flush acks: %w", err)
		}
	}
	// records delivered again would come within a poll or two; take a last look
	lastCtx, lastCancel := context.WithTimeout(ctx, 2*time.Second)
	sc.PollFetches(lastCtx).EachRecord(func(r *kgo.Record) {
		seen[string(r.Value)] = append(seen[string(r.Value)], r.DeliveryCount())
		r.Ack(kgo.AckAccept)
	})
	lastCancel()
	if err := sc.FlushAcks(ctx); err != nil {
		return fmt.Errorf("flush acks: %w", err)
	}

	var bad []string
	for i := 0; i < total; i++ {
		v := "s" + strconv.Itoa(i)
		want := []int32{1}
		if v == released {
			want = []int32{1, 2}
		}
		if fmt.Sprint(seen[v]) != fmt.Sprint(want) {
			bad = append(bad, fmt.Sprintf("%s delivered with counts %v, want %v", v, seen[v], want))
		}
	}
	if len(seen) != total {
		bad = append(bad, fmt.Sprintf("%d distinct values, want %d", len(seen), total))
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		if len(bad) > 5 {
			bad = append(bad[:5], fmt.Sprintf("... %d more", len(bad)-5))
		}
		return fmt.Errorf("released %s, rejected %s: %v", released, rejected, bad)
	}
	ackMu.Lock()
	errs, callbacks := ackErrs, acked
	ackMu.Unlock()
	if len(errs) > 0 {
		return fmt.Errorf("acknowledgements failed: %v", errs)
	}
	if callbacks == 0 {
		return fmt.Errorf("no acknowledgement results reached ShareAckCallback")
	}

	// Leave, then a new member: every record was accepted or rejected, so nothing is left.
	leaveCtx, leaveCancel := context.WithTimeout(ctx, 15*time.Second)
	defer leaveCancel()
	if err := sc.LeaveGroupContext(leaveCtx); err != nil {
		return fmt.Errorf("leave: %w", err)
	}
	sc2, err := member()
	if err != nil {
		return err
	}
	defer sc2.Close()
	againCtx, againCancel := context.WithTimeout(ctx, 5*time.Second)
	defer againCancel()
	var again []string
	for againCtx.Err() == nil {
		sc2.PollFetches(againCtx).EachRecord(func(r *kgo.Record) {
			again = append(again, fmt.Sprintf("%s(count %d)", r.Value, r.DeliveryCount()))
		})
	}
	if len(again) > 0 {
		return fmt.Errorf("a second member got %d records after all were acknowledged: %v", len(again), again)
	}
	return nil
}

// setGroupConfig sets one group config (IncrementalAlterConfigs, resource type GROUP).
func setGroupConfig(ctx context.Context, cl *kgo.Client, group, key, value string) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = key, kmsg.StringPtr(value)
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("IncrementalAlterConfigs: %w", err)
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return fmt.Errorf("IncrementalAlterConfigs %s=%s: %w", key, value, err)
		}
	}
	return nil
}
