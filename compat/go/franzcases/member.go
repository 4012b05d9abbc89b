package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Member process timings: a killed member is noticed after sessionTimeout.
const (
	sessionTimeout    = 6 * time.Second
	heartbeatInterval = 1 * time.Second
	// Slows consumption so that a member still has records to read when it is killed.
	perRecordDelay = 2 * time.Millisecond
)

// member joins a group and appends to its -out file one line per record value it
// consumed and an `ASSIGN p,p,...` line with its whole assignment after every change.
// Offsets are committed synchronously after every batch, before the next poll, and
// rebalances are held off between a poll and its commit, so a record whose commit
// made it is never read again and one whose commit did not is read again by the
// partition's next owner: at least once, nothing skipped.
func member(args []string) error {
	fs := flag.NewFlagSet("member", flag.ExitOnError)
	seed := fs.String("bootstrap", "127.0.0.1:9092", "broker host:port")
	topic := fs.String("topic", "", "topic to consume")
	group := fs.String("group", "", "consumer group")
	out := fs.String("out", "", "file to append consumed values and assignments to")
	_ = fs.Parse(args)

	// Unbuffered writes: what was written before a SIGKILL is in the file.
	f, err := os.OpenFile(*out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	owned := map[int32]bool{}
	writeLine := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = f.WriteString(s + "\n")
	}
	report := func() {
		ps := make([]int, 0, len(owned))
		for p := range owned {
			ps = append(ps, int(p))
		}
		sort.Ints(ps)
		strs := make([]string, len(ps))
		for i, p := range ps {
			strs[i] = fmt.Sprint(p)
		}
		writeLine("ASSIGN " + strings.Join(strs, ","))
	}
	drop := func(m map[string][]int32) {
		for _, p := range m[*topic] {
			delete(owned, p)
		}
		report()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(*seed),
		kgo.ClientID("skua-compat-franz-member"),
		kgo.ConsumerGroup(*group),
		kgo.ConsumeTopics(*topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(sessionTimeout),
		kgo.HeartbeatInterval(heartbeatInterval),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			for _, p := range m[*topic] {
				owned[p] = true
			}
			report()
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				writeLine("COMMITERR " + err.Error())
			}
			drop(m)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { drop(m) }),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx := context.Background()
	for {
		fetches := cl.PollRecords(ctx, 100)
		fetches.EachRecord(func(r *kgo.Record) {
			writeLine(string(r.Value))
			time.Sleep(perRecordDelay)
		})
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			writeLine("COMMITERR " + err.Error())
		}
		cl.AllowRebalance()
	}
}
