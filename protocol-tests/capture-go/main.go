// Command capture-go drives franz-go (kgo + kadm) through the APIs skua serves, for
// capture.py.
//
//	go run . HOST:PORT [KAFKA_VERSION] [txn]
//
// With `txn`, only the transaction steps run (txn.go): their frames carry the producer
// ids the broker handed out, so they are captured and replayed on a broker of their own.
//
// Unpinned, franz-go asks for the newest versions a broker advertises (Fetch with topic
// ids, Metadata v12+, Produce v13). Pinned to an older Kafka release (kgo.MaxVersions), it
// sends the versions that release spoke, which is how the older versions skua advertises
// get real client bytes. A step a pinned client cannot do (the API is newer than the pin,
// or skua refuses the version) is reported and skipped.
//
// Topics are prefixed `franz-` (pinned: `franz<version>-`) so each run replays independently.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

var (
	seed   string
	pin    *kversion.Versions
	pinned string // the Kafka release pinned, "" for none
	prefix = "franz-"
)

func opts(extra ...kgo.Opt) []kgo.Opt {
	o := []kgo.Opt{kgo.SeedBrokers(seed), kgo.RequestRetries(2), kgo.RetryTimeout(5 * time.Second)}
	if pin != nil {
		o = append(o, kgo.MaxVersions(pin))
		if v, ok := pin.LookupMaxKeyVersion(22); !ok || v < 0 { // no InitProducerId
			o = append(o, kgo.DisableIdempotentWrite())
		}
	}
	return append(o, extra...)
}

// step runs one client action with its own deadline; failures are reported, not fatal.
func step(name string, f func(ctx context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	if err := f(ctx); err != nil {
		fmt.Printf("%s: %v\n", name, err)
	}
}

func main() {
	seed = os.Args[1]
	txnOnly := len(os.Args) > 2 && os.Args[len(os.Args)-1] == "txn"
	if txnOnly {
		os.Args = os.Args[:len(os.Args)-1]
	}
	if len(os.Args) > 2 {
		pinned = os.Args[2]
		pin = kversion.FromString(os.Args[2])
		if pin == nil {
			panic("unknown Kafka version " + os.Args[2])
		}
		prefix = "franz" + strings.ReplaceAll(os.Args[2], ".", "") + "-"
	}
	a, b := prefix+"a", prefix+"b"
	cl, err := kgo.NewClient(opts()...)
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if txnOnly {
		txnSteps(adm)
		fmt.Println("done")
		return
	}

	step("create topics", func(ctx context.Context) error {
		r, err := adm.CreateTopics(ctx, 2, 1, map[string]*string{"retention.ms": kadm.StringPtr("86400000")}, a, b)
		if err == nil {
			err = r.Error()
		}
		return err
	})
	time.Sleep(300 * time.Millisecond)
	step("metadata", func(ctx context.Context) error { _, err := adm.Metadata(ctx, a, b); return err })

	for _, codec := range []kgo.CompressionCodec{kgo.Lz4Compression(), kgo.ZstdCompression()} {
		step("produce", func(ctx context.Context) error {
			p, err := kgo.NewClient(opts(kgo.ProducerBatchCompression(codec, kgo.GzipCompression()),
				kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
			if err != nil {
				return err
			}
			defer p.Close()
			var last error
			for i := 0; i < 20; i++ {
				r := &kgo.Record{Topic: a, Partition: int32(i % 2), Key: []byte(fmt.Sprint("k", i)),
					Value: []byte(fmt.Sprint("value-", i)), Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i))}
				p.Produce(ctx, r, func(_ *kgo.Record, err error) {
					if err != nil {
						last = err
					}
				})
			}
			if err := p.Flush(ctx); err != nil {
				return err
			}
			return last
		})
	}

	step("consume", func(ctx context.Context) error {
		c, err := kgo.NewClient(opts(kgo.FetchMaxWait(100*time.Millisecond), kgo.ConsumePartitions(
			map[string]map[int32]kgo.Offset{a: {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtEnd()}}))...)
		if err != nil {
			return err
		}
		defer c.Close()
		got := 0
		for got < 20 && ctx.Err() == nil {
			fs := c.PollFetches(ctx)
			got += fs.NumRecords()
			if errs := fs.Errors(); len(errs) > 0 && errs[0].Err != context.DeadlineExceeded {
				return errs[0].Err
			}
		}
		fmt.Println("consumed", got)
		return nil
	})

	step("list offsets", func(ctx context.Context) error {
		if _, err := adm.ListStartOffsets(ctx, a); err != nil {
			return err
		}
		if _, err := adm.ListEndOffsets(ctx, a); err != nil {
			return err
		}
		_, err := adm.ListOffsetsAfterMilli(ctx, 1_700_000_000_005, a)
		return err
	})
	step("offset for leader epoch", func(ctx context.Context) error {
		var epochs kadm.OffsetForLeaderEpochRequest
		epochs.Add(a, 0, 0)
		_, err := adm.OffsetForLeaderEpoch(ctx, epochs)
		return err
	})
	step("describe configs", func(ctx context.Context) error {
		if _, err := adm.DescribeTopicConfigs(ctx, a); err != nil {
			return err
		}
		_, err := adm.DescribeBrokerConfigs(ctx, 1)
		return err
	})
	step("describe cluster", func(ctx context.Context) error {
		_, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
		return err
	})
	step("describe topic partitions", func(ctx context.Context) error {
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		t := kmsg.NewDescribeTopicPartitionsRequestTopic()
		t.Topic = a
		req.Topics = append(req.Topics, t)
		_, err := req.RequestWith(ctx, cl)
		return err
	})
	step("create partitions", func(ctx context.Context) error {
		r, err := adm.CreatePartitions(ctx, 1, b)
		if err == nil {
			err = r.Error()
		}
		return err
	})
	groupSteps(cl, adm, a)
	step("delete topics", func(ctx context.Context) error {
		r, err := adm.DeleteTopics(ctx, b)
		if err == nil {
			err = r.Error()
		}
		return err
	})
	// Last, so the frames before it find the records it removes (and so DeleteRecords
	// frames captured on their own append to a client's fixtures in the same place).
	step("delete records", func(ctx context.Context) error {
		var offsets kadm.Offsets
		offsets.AddOffset(a, 0, 1, -1)
		r, err := adm.DeleteRecords(ctx, offsets)
		if err == nil {
			err = r.Error()
		}
		return err
	})
	// After DeleteRecords: the log dir frames were captured on their own (capture.py
	// --apis 35) and appended to each client's fixtures.
	step("describe log dirs", func(ctx context.Context) error {
		if _, err := adm.DescribeAllLogDirs(ctx, nil); err != nil {
			return err
		}
		_, err := adm.DescribeAllLogDirs(ctx, kadm.TopicsSet{a: {0: {}}})
		return err
	})
	// A path that is no log dir (LOG_DIR_NOT_FOUND wherever the frames are replayed).
	// Captured on their own too (capture.py --apis 34).
	step("alter replica log dirs", func(ctx context.Context) error {
		var req kadm.AlterReplicaLogDirsReq
		req.Add("/no/such/log/dir", kadm.TopicsSet{a: {0: {}}})
		_, err := adm.AlterAllReplicaLogDirs(ctx, req)
		return err
	})
	fmt.Println("done")
}
