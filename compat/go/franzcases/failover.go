package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const partitions = 6

func name(what string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "compat-franz-" + what + "-" + hex.EncodeToString(b)
}

// produce sends values prefix0..prefix(n-1), keyed so that they spread over the partitions.
func produce(cl *kgo.Client, topic, prefix string, n int) error {
	records := make([]*kgo.Record, n)
	for i := range records {
		records[i] = &kgo.Record{
			Topic: topic,
			Key:   []byte(fmt.Sprintf("k%d", i)),
			Value: []byte(fmt.Sprintf("%s%d", prefix, i)),
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, records...).FirstErr()
}

// memberFile is what one member process wrote: consumed values and assignments.
type memberFile string

func (f memberFile) lines() []string {
	b, err := os.ReadFile(string(f))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// assignment is the member's latest ASSIGN line: the partitions it holds now.
func (f memberFile) assignment() []string {
	var last []string
	for _, l := range f.lines() {
		if rest, ok := strings.CutPrefix(l, "ASSIGN"); ok {
			last = strings.FieldsFunc(rest, func(r rune) bool { return r == ',' || r == ' ' })
		}
	}
	return last
}

func sizes(files []memberFile) []int {
	out := make([]int, len(files))
	for i, f := range files {
		out[i] = len(f.assignment())
	}
	sort.Ints(out)
	return out
}

// covering: every partition held by exactly one of files, with the sizes wanted.
func covering(files []memberFile, want []int) bool {
	seen := map[string]int{}
	for _, f := range files {
		for _, p := range f.assignment() {
			seen[p]++
		}
	}
	if len(seen) != partitions {
		return false
	}
	for _, n := range seen {
		if n != 1 {
			return false
		}
	}
	return fmt.Sprint(sizes(files)) == fmt.Sprint(want)
}

func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return cond()
}

// failoverKill9: three member processes share six partitions two each; one is killed
// with SIGKILL (no LeaveGroup); after the session timeout the other two hold three
// each. With synchronous commits every record, produced before or after the kill, is
// consumed at least once and the group's committed offsets reach the end of every
// partition. A second group then reads everything on its own.
func failoverKill9() error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(*bootstrap), kgo.ClientID("skua-compat-franz"))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	topic, group := name("failover"), name("failover-g")
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	defer func() { _, _ = adm.DeleteTopics(ctx, topic) }()
	const before, after = 3000, 1000
	if err := produce(cl, topic, "a", before); err != nil {
		return fmt.Errorf("produce: %w", err)
	}

	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "franz-failover")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var files []memberFile
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}()
	for i := 0; i < 3; i++ {
		f := memberFile(filepath.Join(dir, fmt.Sprintf("m%d.txt", i)))
		p := exec.Command(self, "member", "-bootstrap", *bootstrap, "-topic", topic,
			"-group", group, "-out", string(f))
		p.Stderr = os.Stderr
		if err := p.Start(); err != nil {
			return err
		}
		files, procs = append(files, f), append(procs, p)
	}
	if !waitFor(45*time.Second, func() bool { return covering(files, []int{2, 2, 2}) }) {
		return fmt.Errorf("three members should hold two partitions each, hold %v", sizes(files))
	}
	victim := files[0].assignment()
	time.Sleep(500 * time.Millisecond)
	if err := procs[0].Process.Kill(); err != nil { // SIGKILL
		return err
	}
	_ = procs[0].Wait()
	killed := time.Now()
	procs = procs[1:]
	if err := produce(cl, topic, "b", after); err != nil {
		return fmt.Errorf("produce after the kill: %w", err)
	}

	survivors := files[1:]
	if !waitFor(45*time.Second, func() bool { return covering(survivors, []int{3, 3}) }) {
		return fmt.Errorf("the two survivors should hold three partitions each, hold %v", sizes(survivors))
	}
	// Without a LeaveGroup the coordinator only notices the session timeout.
	took := time.Since(killed)
	if took < sessionTimeout-2*heartbeatInterval {
		return fmt.Errorf("partitions moved %s after the kill, before the %s session timeout", took, sessionTimeout)
	}
	fmt.Fprintf(os.Stderr, "# failover: killed member held %v; survivors hold %v and %v, %.1fs after the kill\n",
		victim, survivors[0].assignment(), survivors[1].assignment(), took.Seconds())
	for _, p := range victim {
		moved := false
		for _, f := range survivors {
			moved = moved || strings.Contains(","+strings.Join(f.assignment(), ",")+",", ","+p+",")
		}
		if !moved {
			return fmt.Errorf("partition %s of the killed member did not move", p)
		}
	}

	expected := map[string]bool{}
	for i := 0; i < before; i++ {
		expected[fmt.Sprintf("a%d", i)] = true
	}
	for i := 0; i < after; i++ {
		expected[fmt.Sprintf("b%d", i)] = true
	}
	missing := func() []string {
		seen := map[string]bool{}
		for _, f := range files {
			for _, l := range f.lines() {
				seen[l] = true
			}
		}
		var out []string
		for v := range expected {
			if !seen[v] {
				out = append(out, v)
			}
		}
		sort.Strings(out)
		return out
	}
	if !waitFor(45*time.Second, func() bool { return len(missing()) == 0 }) {
		m := missing()
		return fmt.Errorf("%d records never consumed after the failover, e.g. %v", len(m), m[:min(5, len(m))])
	}
	lines := 0
	for _, f := range files {
		lines += len(f.lines())
	}
	fmt.Fprintf(os.Stderr, "# failover: %d records, %d lines written by the members\n", len(expected), lines)
	var lag string
	if !waitFor(20*time.Second, func() bool { lag = commitLag(ctx, adm, topic, group); return lag == "" }) {
		return fmt.Errorf("committed offsets do not reach the end: %s", lag)
	}
	for _, f := range survivors {
		for _, l := range f.lines() {
			if strings.HasPrefix(l, "COMMITERR") {
				return fmt.Errorf("a survivor's synchronous commit failed: %s", l)
			}
		}
	}
	return secondGroupReadsAll(topic, expected)
}

// commitLag describes partitions whose committed offset is short of the end, "" if none.
func commitLag(ctx context.Context, adm *kadm.Client, topic, group string) string {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return err.Error()
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return err.Error()
	}
	var lag []string
	for p := int32(0); p < partitions; p++ {
		end, _ := ends.Lookup(topic, p)
		c, ok := committed.Lookup(topic, p)
		if !ok || c.At != end.Offset {
			lag = append(lag, fmt.Sprintf("p%d committed %d of %d", p, c.At, end.Offset))
		}
	}
	return strings.Join(lag, ", ")
}

func secondGroupReadsAll(topic string, expected map[string]bool) error {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(*bootstrap),
		kgo.ConsumerGroup(name("failover-other")),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	seen := map[string]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	for len(seen) < len(expected) && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	if len(seen) != len(expected) {
		return fmt.Errorf("a second group read %d of %d records", len(seen), len(expected))
	}
	return nil
}
