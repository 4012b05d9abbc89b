// Command capture-sarama sends the ElectLeaders versions only older clients send: IBM/sarama
// picks the version from its configured Kafka version (v0 before 0.11, v1 from 0.11 to
// 2.3, v2 from 2.4), whatever the broker advertises. Run by capture-cluster.sh --scenario
// admin, against a Kafka 3.9.1 cluster behind recording proxies.
//
//	go run . -bootstrap 127.0.0.1:9092 -topic cluster-capture
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/IBM/sarama"
)

func main() {
	bootstrap := flag.String("bootstrap", "127.0.0.1:9092", "broker host:port")
	topic := flag.String("topic", "cluster-capture", "an existing topic with partitions 0-2")
	flag.Parse()
	failed := false
	for _, v := range []sarama.KafkaVersion{sarama.V0_10_2_0, sarama.V2_3_0_0} {
		c := sarama.NewConfig()
		c.Version = v
		c.ClientID = "capture-sarama-" + v.String()
		c.Net.DialTimeout = 10 * time.Second
		admin, err := sarama.NewClusterAdmin([]string{*bootstrap}, c)
		if err != nil {
			fmt.Fprintf(os.Stderr, "sarama %s: admin: %v\n", v, err)
			failed = true
			continue
		}
		res, err := admin.ElectLeaders(sarama.PreferredElection, map[string][]int32{*topic: {0, 1, 2}})
		if err != nil {
			fmt.Fprintf(os.Stderr, "sarama %s: ElectLeaders: %v\n", v, err)
			failed = true
		}
		for t, parts := range res {
			for p, r := range parts {
				fmt.Printf("sarama %s: ElectLeaders %s-%d: %v\n", v, t, p, r.ErrorCode)
			}
		}
		_ = admin.Close()
	}
	if failed {
		os.Exit(1)
	}
}
