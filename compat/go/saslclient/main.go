// Command saslclient is franz-go over SASL for skua's sasl compat suite:
//
//	saslclient BOOTSTRAP PROTOCOL MECHANISM USER PASSWORD CA TOPIC roundtrip|refused
//
// `roundtrip` produces 20 records and consumes them back in a consumer group; `refused`
// expects the broker to refuse the credentials and prints the client's error.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func main() {
	if len(os.Args) != 9 {
		fail("usage: saslclient BOOTSTRAP PROTOCOL MECHANISM USER PASSWORD CA TOPIC roundtrip|refused")
	}
	bootstrap, protocol, mechanism, user, password, ca, topic, mode := os.Args[1], os.Args[2], os.Args[3], os.Args[4], os.Args[5], os.Args[6], os.Args[7], os.Args[8]
	var m sasl.Mechanism
	switch mechanism {
	case "PLAIN":
		m = plain.Auth{User: user, Pass: password}.AsMechanism()
	case "SCRAM-SHA-512":
		m = scram.Auth{User: user, Pass: password}.AsSha512Mechanism()
	case "SCRAM-SHA-256":
		m = scram.Auth{User: user, Pass: password}.AsSha256Mechanism()
	default:
		fail("unknown mechanism " + mechanism)
	}
	opts := []kgo.Opt{kgo.SeedBrokers(bootstrap), kgo.SASL(m), kgo.RequestRetries(2)}
	if protocol == "SASL_SSL" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			fail(err.Error())
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{RootCAs: pool, ServerName: "localhost"}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	if mode == "refused" {
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			fail(err.Error())
		}
		defer cl.Close()
		short, cancelShort := context.WithTimeout(ctx, 5*time.Second)
		defer cancelShort()
		_, err = kadm.NewClient(cl).ListTopics(short)
		if err == nil {
			fail("metadata answered with a wrong password")
		}
		fmt.Println("refused:", err)
		if !strings.Contains(strings.ToLower(err.Error()), "sasl") && !strings.Contains(strings.ToLower(err.Error()), "auth") {
			fail("no authentication error: " + err.Error())
		}
		return
	}
	producer, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())...)
	if err != nil {
		fail(err.Error())
	}
	var sent []string
	for i := 0; i < 20; i++ {
		v := fmt.Sprintf("franz-go value %d over %s", i, protocol)
		sent = append(sent, v)
		if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			fail("produce: " + err.Error())
		}
	}
	producer.Close()
	consumer, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(fmt.Sprintf("g-%d", time.Now().UnixNano())), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		fail(err.Error())
	}
	defer consumer.Close()
	var got []string
	for len(got) < len(sent) {
		fetches := consumer.PollFetches(ctx)
		if errs := fetches.Errors(); len(errs) > 0 {
			fail(fmt.Sprintf("consume: %v", errs))
		}
		fetches.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		fail("commit: " + err.Error())
	}
	if strings.Join(got, "\n") != strings.Join(sent, "\n") {
		fail(fmt.Sprintf("consumed %v, not what was sent", got[:3]))
	}
	fmt.Println("20 records produced and consumed back")
}

func fail(why string) {
	fmt.Fprintln(os.Stderr, why)
	os.Exit(1)
}
