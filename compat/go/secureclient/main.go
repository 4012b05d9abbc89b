// Command secureclient is franz-go over TLS and SASL for skua's ssl and sasl compat suites:
//
//	secureclient BOOTSTRAP TOPIC roundtrip|refused [KEY=VALUE...]
//
// The KEY=VALUE settings use librdkafka's names: security.protocol (SSL, SASL_PLAINTEXT
// or SASL_SSL), sasl.mechanism, sasl.username, sasl.password, ssl.ca.location,
// ssl.certificate.location and ssl.key.location (a client certificate and its key, PEM).
// `roundtrip` produces 20 records and consumes them back in a consumer group; `refused`
// expects the broker to refuse the client (over SASL its credentials, over SSL its
// certificate or the lack of one) and prints the client's error.
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
	if len(os.Args) < 4 {
		fail("usage: secureclient BOOTSTRAP TOPIC roundtrip|refused [KEY=VALUE...]")
	}
	bootstrap, topic, mode := os.Args[1], os.Args[2], os.Args[3]
	conf := map[string]string{}
	for _, kv := range os.Args[4:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			fail("not KEY=VALUE: " + kv)
		}
		conf[k] = v
	}
	protocol := conf["security.protocol"]
	isSASL := strings.HasPrefix(protocol, "SASL_")
	opts := []kgo.Opt{kgo.SeedBrokers(bootstrap), kgo.RequestRetries(2)}
	if isSASL {
		var m sasl.Mechanism
		user, password := conf["sasl.username"], conf["sasl.password"]
		switch conf["sasl.mechanism"] {
		case "PLAIN":
			m = plain.Auth{User: user, Pass: password}.AsMechanism()
		case "SCRAM-SHA-512":
			m = scram.Auth{User: user, Pass: password}.AsSha512Mechanism()
		case "SCRAM-SHA-256":
			m = scram.Auth{User: user, Pass: password}.AsSha256Mechanism()
		default:
			fail("unknown mechanism " + conf["sasl.mechanism"])
		}
		opts = append(opts, kgo.SASL(m))
	}
	if protocol == "SSL" || protocol == "SASL_SSL" {
		pem, err := os.ReadFile(conf["ssl.ca.location"])
		if err != nil {
			fail(err.Error())
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		cfg := &tls.Config{RootCAs: pool, ServerName: "localhost"}
		if cert := conf["ssl.certificate.location"]; cert != "" {
			pair, err := tls.LoadX509KeyPair(cert, conf["ssl.key.location"])
			if err != nil {
				fail(err.Error())
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
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
			fail("metadata answered to a client the broker should refuse")
		}
		fmt.Println("refused:", err)
		if !refusal(err.Error(), isSASL) {
			fail("no refusal error: " + err.Error())
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

// refusal: whether a client's error says the broker refused it as the protocol would (an
// authentication error over SASL, a failed TLS handshake over SSL).
func refusal(err string, isSASL bool) bool {
	err = strings.ToLower(err)
	if isSASL {
		return strings.Contains(err, "sasl") || strings.Contains(err, "auth")
	}
	// The TLS alert the broker sent (certificate required, unknown CA, bad certificate).
	for _, w := range []string{"alert", "certificate", "handshake"} {
		if strings.Contains(err, w) {
			return true
		}
	}
	return false
}

func fail(why string) {
	fmt.Fprintln(os.Stderr, why)
	os.Exit(1)
}
