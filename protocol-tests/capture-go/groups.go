package main

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// supports reports whether the pinned release (or any, unpinned) has the api key at all.
func supports(key int16) bool {
	if pin == nil {
		return true
	}
	v, ok := pin.LookupMaxKeyVersion(key)
	return ok && v >= 0
}

// groupSteps drives the consumer group and config APIs: a classic group consumer that
// commits (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, OffsetFetch, OffsetCommit,
// LeaveGroup), a KIP-848 one where the release has ConsumerGroupHeartbeat, then kadm's
// group and config calls. Each group has one member at a time, so the replay (one
// connection, capture order) never waits on a member that has not joined yet.
func groupSteps(cl *kgo.Client, adm *kadm.Client, topic string) {
	g := prefix + "g"
	if supports(11) {
		step("classic group", func(ctx context.Context) error {
			return consumeInGroup(ctx, g, topic, false)
		})
	}
	// A commit outside any generation, as an admin sends it: the releases that cannot
	// produce (skua refuses Produce v0-2) have nothing for their group member to commit.
	// Kafka 0.8.2 sends OffsetCommit v1, which skua does not advertise (v2+).
	step("commit offsets", func(ctx context.Context) error {
		return adm.CommitAllOffsets(ctx, g, offsetsAt(topic, 3))
	})
	g848 := prefix + "g848"
	if supports(68) {
		if pinned == "" || pinned == "4.0" {
			step("consumer group (KIP-848)", func(ctx context.Context) error {
				return consumeInGroup(ctx, g848, topic, true)
			})
		} else {
			step("consumer group heartbeat", func(ctx context.Context) error { return heartbeat848(ctx, cl, g848, topic) })
		}
	}
	step("list groups", func(ctx context.Context) error { _, err := adm.ListGroups(ctx); return err })
	if supports(69) {
		step("list groups by type", func(ctx context.Context) error {
			_, err := adm.ListGroupsByType(ctx, []string{"consumer"})
			return err
		})
		step("describe consumer groups", func(ctx context.Context) error {
			_, err := adm.DescribeConsumerGroups(ctx, g848)
			return err
		})
	}
	step("describe groups", func(ctx context.Context) error {
		_, err := adm.DescribeGroups(ctx, g)
		return err
	})
	step("fetch offsets", func(ctx context.Context) error { _, err := adm.FetchOffsets(ctx, g); return err })
	if supports(47) {
		step("delete offsets", func(ctx context.Context) error {
			s := kadm.TopicsSet{}
			s.Add(topic, 1)
			r, err := adm.DeleteOffsets(ctx, g, s)
			if err == nil {
				err = r.Error()
			}
			return err
		})
	}
	if supports(42) {
		step("delete groups", func(ctx context.Context) error {
			r, err := adm.DeleteGroups(ctx, g, g848)
			if err == nil {
				err = r.Error()
			}
			return err
		})
	}
	if supports(44) {
		step("incremental alter configs", func(ctx context.Context) error {
			r, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
				{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("3600000")},
				{Op: kadm.DeleteConfig, Name: "cleanup.policy"},
			}, topic)
			if err == nil {
				err = firstErr(r)
			}
			return err
		})
	}
	if supports(33) {
		step("alter configs", func(ctx context.Context) error {
			r, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{
				{Name: "retention.ms", Value: kadm.StringPtr("7200000")},
			}, topic)
			if err == nil {
				err = firstErr(r)
			}
			return err
		})
	}
}

func firstErr(r kadm.AlterConfigsResponses) error {
	for _, x := range r {
		if x.Err != nil {
			return x.Err
		}
	}
	return nil
}

func offsetsAt(topic string, at int64) kadm.Offsets {
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: at, LeaderEpoch: -1})
	return os
}

// consumeInGroup joins group, reads what it is given, commits it and leaves (Close).
func consumeInGroup(ctx context.Context, group, topic string, kip848 bool) error {
	gopts := []kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(100 * time.Millisecond), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.HeartbeatInterval(300 * time.Millisecond)}
	if kip848 {
		gopts = append(gopts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()))
	}
	c, err := kgo.NewClient(opts(gopts...)...)
	if err != nil {
		return err
	}
	defer c.Close() // leaves the group
	got := 0
	pollCtx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	start := time.Now()
	// At least a second in the group, so that a Heartbeat is sent.
	for (got < 20 || time.Since(start) < time.Second) && pollCtx.Err() == nil {
		fs := c.PollFetches(pollCtx)
		got += fs.NumRecords()
	}
	fmt.Println(group, "consumed", got)
	commitCtx, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	return c.CommitUncommittedOffsets(commitCtx)
}

// heartbeat848 joins and leaves a KIP-848 group by hand: franz-go runs its KIP-848
// consumer only against Kafka 4.0+, and releases 3.7-3.9 spoke ConsumerGroupHeartbeat v0,
// where the broker names the member.
func heartbeat848(ctx context.Context, cl *kgo.Client, group, topic string) error {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group = group
	req.MemberEpoch = 0
	req.RebalanceTimeoutMillis = 30000
	req.SubscribedTopicNames = []string{topic}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if resp.ErrorCode != 0 || resp.MemberID == nil {
		return fmt.Errorf("join: error %d", resp.ErrorCode)
	}
	leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	leave.Group = group
	leave.MemberID = *resp.MemberID
	leave.MemberEpoch = -1
	_, err = leave.RequestWith(ctx, cl)
	return err
}
