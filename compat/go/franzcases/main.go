// Command franzcases runs skua's own compatibility cases for franz-go (kgo), beyond
// franz-go's test suite: scenarios that need several client processes, and fetch
// limits below a batch.
//
//	go build -o franz-cases ./franzcases && ./franz-cases -bootstrap 127.0.0.1:9092
//
// Prints one `PASS id` / `FAIL id: reason` line per case. `franz-cases member ...` is a
// consumer group member as its own process, which a case starts and kills with SIGKILL.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var bootstrap = flag.String("bootstrap", "127.0.0.1:9092", "broker host:port")
var only = flag.String("run", "", "run only the cases whose id contains this")

func run(id string, limit time.Duration, f func() error) {
	if !strings.Contains(id, *only) {
		return
	}
	done := make(chan error, 1)
	go func() { done <- f() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(limit):
		err = fmt.Errorf("case timed out after %s", limit)
	}
	if err != nil {
		fmt.Printf("FAIL %s: %s\n", id, strings.ReplaceAll(err.Error(), "\n", " "))
	} else {
		fmt.Printf("PASS %s\n", id)
	}
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "member" {
		if err := member(os.Args[2:]); err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "member:", err)
			os.Exit(1)
		}
		return
	}
	flag.Parse()
	run("franzcases.group.failover_kill9", 150*time.Second, failoverKill9)
	run("franzcases.fetch_below_batch.max_partition_bytes", 60*time.Second, fetchBelowBatch(kgo.FetchMaxPartitionBytes(1024)))
	// FetchMaxBytes also lowers the partition limit to it
	run("franzcases.fetch_below_batch.max_bytes", 60*time.Second, fetchBelowBatch(kgo.FetchMaxBytes(1024)))
	run("franzcases.share.release_reject_accept", 100*time.Second, shareConsumer)
}
