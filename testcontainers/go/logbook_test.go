package logbook_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	logbook "github.com/logbook-dev/logbook/testcontainers/go"
)

// image is the image under test: LOGBOOK_IMAGE, else logbook:latest (built locally with
// `docker build -t logbook:latest .` at the repo's root).
func image() string {
	if img := os.Getenv("LOGBOOK_IMAGE"); img != "" {
		return img
	}
	return "logbook:latest"
}

// start runs a broker for one test and terminates it when the test ends.
func start(t *testing.T, ctx context.Context, opts ...testcontainers.ContainerCustomizer) (*logbook.LogbookContainer, []string) {
	t.Helper()
	began := time.Now()
	ctr, err := logbook.Run(ctx, image(), opts...)
	testcontainers.CleanupContainer(t, ctr)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	brokers, err := ctr.Brokers(ctx)
	if err != nil {
		t.Fatalf("brokers: %v", err)
	}
	t.Logf("broker at %v (network: %v), started in %v", brokers, ctr.NetworkBrokers(), time.Since(began).Round(time.Millisecond))
	return ctr, brokers
}

func newClient(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, partitions int32) {
	t.Helper()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// readPartition reads partition 0 of topic from its start until want records came, then
// polls once more so that a record past them (a duplicate) would be seen too.
// opts are added to the consumer's (TLS, SASL).
func readPartition(t *testing.T, ctx context.Context, brokers []string, topic string, want int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := newClient(t, append([]kgo.Opt{kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}})}, opts...)...)
	var records []*kgo.Record
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for len(records) < want && ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		fetches.EachRecord(func(r *kgo.Record) { records = append(records, r) })
	}
	more, cancelMore := context.WithTimeout(context.Background(), time.Second)
	defer cancelMore()
	cl.PollFetches(more).EachRecord(func(r *kgo.Record) { records = append(records, r) })
	return records
}

// TestProduceAndConsumeInAGroup: 10 records through the mapped port, read back by a consumer
// group at offsets 0..9 in order, and the group's committed offset is 10.
func TestProduceAndConsumeInAGroup(t *testing.T) {
	ctx := context.Background()
	_, brokers := start(t, ctx)

	producer := newClient(t, kgo.SeedBrokers(brokers...))
	createTopic(t, ctx, producer, "orders", 1)
	for i := range 10 {
		r := &kgo.Record{Topic: "orders", Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}
		if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		if r.Offset != int64(i) {
			t.Fatalf("record %d written at offset %d", i, r.Offset)
		}
	}

	consumer := newClient(t, kgo.SeedBrokers(brokers...),
		kgo.ConsumerGroup("billing"),
		kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit())
	var seen []string
	pollCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for len(seen) < 10 && pollCtx.Err() == nil {
		fetches := consumer.PollFetches(pollCtx)
		for _, e := range fetches.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) {
				t.Fatalf("fetch %s/%d: %v", e.Topic, e.Partition, e.Err)
			}
		}
		fetches.EachRecord(func(r *kgo.Record) {
			seen = append(seen, fmt.Sprintf("%d:%s", r.Offset, r.Value))
		})
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}

	var want []string
	for i := range 10 {
		want = append(want, fmt.Sprintf("%d:v%d", i, i))
	}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("consumed %v, want %v", seen, want)
	}
	committed, err := kadm.NewClient(producer).FetchOffsets(ctx, "billing")
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	if o, ok := committed.Lookup("orders", 0); !ok || o.Err != nil || o.At != 10 {
		t.Fatalf("committed offset of orders/0: %+v (found %v), want 10", o, ok)
	}
}

// TestNoMessageLostWhenTheLeaderMoves: an idempotent producer sends 100 records to "out"
// while the partition's leader is gone for 2 s (partition_unavailable), then while its
// produces are refused three times with NOT_LEADER_OR_FOLLOWER. Every send succeeds, and
// "out" holds exactly the 100 records, in order, once each.
func TestNoMessageLostWhenTheLeaderMoves(t *testing.T) {
	ctx := context.Background()
	ctr, brokers := start(t, ctx, logbook.WithFaultInjection())

	// franz-go's producer is idempotent by default (acks=all, sequence numbers): a retried
	// batch the broker already wrote is not written twice. MetadataMinAge only makes it look
	// for the new leader sooner than its default 5 s, to keep the test short.
	producer := newClient(t, kgo.SeedBrokers(brokers...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MetadataMinAge(250*time.Millisecond))
	createTopic(t, ctx, producer, "out", 1)

	var (
		mu     sync.Mutex
		failed []error
		wg     sync.WaitGroup
	)
	send := func(from, to int) {
		for i := from; i < to; i++ {
			wg.Add(1)
			producer.Produce(ctx, &kgo.Record{Topic: "out", Value: fmt.Appendf(nil, "r%d", i)}, func(r *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					mu.Lock()
					failed = append(failed, fmt.Errorf("%s: %w", r.Value, err))
					mu.Unlock()
				}
			})
		}
	}

	// Before: 30 records with a leader.
	send(0, 30)
	if err := producer.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}

	// The leader goes away for 2 s while the next 35 are sent.
	gone, err := ctr.AddFault(ctx, map[string]any{"kind": "partition_unavailable", "topic": "out", "duration_ms": 2000})
	if err != nil {
		t.Fatalf("add partition_unavailable: %v", err)
	}
	began := time.Now()
	send(30, 65)
	if err := producer.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	t.Logf("35 records sent across the 2 s without a leader in %v", time.Since(began).Round(time.Millisecond))

	// Then three produces are refused with NOT_LEADER_OR_FOLLOWER while the last 35 are sent,
	// one at a time so that there are more produces than refusals.
	refused, err := ctr.AddFault(ctx, map[string]any{
		"kind": "error", "api": "Produce", "topic": "out", "error": "NOT_LEADER_OR_FOLLOWER", "count": 3,
	})
	if err != nil {
		t.Fatalf("add error fault: %v", err)
	}
	began = time.Now()
	for i := 65; i < 100; i++ {
		send(i, i+1)
		if err := producer.Flush(ctx); err != nil {
			t.Fatalf("flush: %v", err)
		}
	}
	wg.Wait()
	t.Logf("35 records sent one at a time across 3 NOT_LEADER_OR_FOLLOWER refusals in %v", time.Since(began).Round(time.Millisecond))
	if len(failed) > 0 {
		t.Fatalf("%d sends failed: %v", len(failed), failed)
	}

	faults, err := ctr.Faults(ctx)
	if err != nil {
		t.Fatalf("faults: %v", err)
	}
	byID := map[int64]map[string]any{}
	for _, f := range faults {
		id, _ := f["id"].(float64)
		byID[int64(id)] = f
	}
	if f := byID[refused]; f == nil || f["injected"] != float64(3) {
		t.Fatalf("NOT_LEADER_OR_FOLLOWER fault %d: %v, want injected == 3 (all: %v)", refused, f, faults)
	}
	if f := byID[gone]; f == nil || f["injected"] == nil || f["injected"].(float64) < 1 {
		t.Fatalf("partition_unavailable fault %d: %v, want injected >= 1 (all: %v)", gone, f, faults)
	}

	records := readPartition(t, ctx, brokers, "out", 100)
	var got, want []string
	for _, r := range records {
		got = append(got, fmt.Sprintf("%d:%s", r.Offset, r.Value))
	}
	for i := range 100 {
		want = append(want, fmt.Sprintf("%d:r%d", i, i))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("out holds %d records %v, want %v", len(got), got, want)
	}
	ends, err := kadm.NewClient(producer).ListEndOffsets(ctx, "out")
	if err != nil {
		t.Fatalf("end offsets: %v", err)
	}
	if o, ok := ends.Lookup("out", 0); !ok || o.Err != nil || o.Offset != 100 {
		t.Fatalf("end offset of out/0: %+v, want 100", o)
	}

	if err := ctr.ClearFaults(ctx); err != nil {
		t.Fatalf("clear faults: %v", err)
	}
	if faults, err := ctr.Faults(ctx); err != nil || len(faults) != 0 {
		t.Fatalf("after clear: %v %v, want none", faults, err)
	}
}

// TestSASLPlainUser: the user of WithSASLPlainUser produces (offset 0); the same user with a
// wrong password is refused.
func TestSASLPlainUser(t *testing.T) {
	ctx := context.Background()
	_, brokers := start(t, ctx, logbook.WithSASLPlainUser("alice", "secret"))

	alice := newClient(t, kgo.SeedBrokers(brokers...), kgo.SASL(plain.Auth{User: "alice", Pass: "secret"}.AsMechanism()))
	createTopic(t, ctx, alice, "secured", 1)
	r := &kgo.Record{Topic: "secured", Key: []byte("k"), Value: []byte("v")}
	if err := alice.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("alice produce: %v", err)
	}
	if r.Offset != 0 {
		t.Fatalf("alice's record at offset %d, want 0", r.Offset)
	}

	wrong := newClient(t, kgo.SeedBrokers(brokers...), kgo.SASL(plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism()),
		kgo.RecordDeliveryTimeout(5*time.Second))
	pingCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := wrong.Ping(pingCtx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: ping answered %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	produceCtx, cancelProduce := context.WithTimeout(ctx, 15*time.Second)
	defer cancelProduce()
	if err := wrong.ProduceSync(produceCtx, &kgo.Record{Topic: "secured", Value: []byte("x")}).FirstErr(); err == nil {
		t.Fatal("wrong password: produce succeeded")
	} else {
		t.Logf("wrong password: produce refused: %v", err)
	}
}

// TestNetworkBrokersNamesTheAlias: with a network alias, containers on the network are told
// "<alias>:9093".
func TestNetworkBrokersNamesTheAlias(t *testing.T) {
	ctx := context.Background()
	nw, err := network.New(ctx)
	if err != nil {
		t.Fatalf("network: %v", err)
	}
	t.Cleanup(func() { _ = nw.Remove(context.Background()) })
	ctr, _ := start(t, ctx, network.WithNetwork([]string{"logbook"}, nw))
	if got := fmt.Sprint(ctr.NetworkBrokers()); got != "[logbook:9093]" {
		t.Fatalf("network brokers %s, want [logbook:9093]", got)
	}
	if !regexp.MustCompile(`^http://.+:\d+$`).MatchString(mustFaultURL(t, ctx, ctr)) {
		t.Fatal("fault url is not http://host:port")
	}
}

func mustFaultURL(t *testing.T, ctx context.Context, ctr *logbook.LogbookContainer) string {
	t.Helper()
	u, err := ctr.FaultURL(ctx)
	if err != nil {
		t.Fatalf("fault url: %v", err)
	}
	return u
}

// testPKI is a CA made for one test and a server certificate it signed for localhost and
// 127.0.0.1 (the addresses Brokers can return), all PEM.
type testPKI struct {
	caPEM, certPEM, keyPEM string
}

// newPKI makes a self-signed CA named cn and a server certificate it signs. ECDSA P-256 keeps
// it fast; the broker's rustls reads PKCS#8 keys of any kind.
func newPKI(t *testing.T, cn string) testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTemplate := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	serverKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serverDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, &serverKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(serverKey)
	if err != nil {
		t.Fatal(err)
	}
	encode := func(kind string, der []byte) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}))
	}
	return testPKI{
		caPEM:   encode("CERTIFICATE", caDER),
		certPEM: encode("CERTIFICATE", serverDER),
		keyPEM:  encode("PRIVATE KEY", keyDER),
	}
}

// trusting is the client option to dial TLS trusting only caPEM.
func trusting(t *testing.T, caPEM string) kgo.Opt {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(caPEM)) {
		t.Fatal("CA PEM holds no certificate")
	}
	return kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
}

// endOffset is the high watermark of partition 0 of topic.
func endOffset(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) int64 {
	t.Helper()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	o, ok := ends.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("end offset of %s/0: %+v (found %v)", topic, o, ok)
	}
	return o.Offset
}

// assertUnknownAuthority fails unless err is the client refusing the broker's certificate
// because no CA it trusts signed it.
func assertUnknownAuthority(t *testing.T, what string, err error) {
	t.Helper()
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("%s: %v (%T), want x509.UnknownAuthorityError", what, err, err)
	}
	if got := unknown.Cert.Subject.CommonName; got != "localhost" {
		t.Fatalf("%s: refused certificate names %q, want localhost", what, got)
	}
}

// TestOptionsComposeTheExternalProtocol: WithTLS and WithSASLPlainUser give SASL_SSL in
// either order, touch only the EXTERNAL entry (a cluster node's CONTROLLER stays), and
// WithTLS puts key then chain in one PEM keystore. No Docker needed.
func TestOptionsComposeTheExternalProtocol(t *testing.T) {
	apply := func(protocolMap string, opts ...testcontainers.CustomizeRequestOption) testcontainers.GenericContainerRequest {
		t.Helper()
		req := testcontainers.GenericContainerRequest{}
		req.Env = map[string]string{"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": protocolMap}
		for _, opt := range opts {
			if err := opt.Customize(&req); err != nil {
				t.Fatal(err)
			}
		}
		return req
	}
	base := "EXTERNAL:PLAINTEXT,BROKER:PLAINTEXT"
	tlsOpt := logbook.WithTLS("CHAIN\n", "\nKEY\n")
	sasl := logbook.WithSASLPlainUser("alice", "secret")
	for _, c := range []struct {
		name, protocolMap string
		opts              []testcontainers.CustomizeRequestOption
		want              string
	}{
		{"tls", base, []testcontainers.CustomizeRequestOption{tlsOpt}, "EXTERNAL:SSL,BROKER:PLAINTEXT"},
		{"sasl", base, []testcontainers.CustomizeRequestOption{sasl}, "EXTERNAL:SASL_PLAINTEXT,BROKER:PLAINTEXT"},
		{"tls then sasl", base, []testcontainers.CustomizeRequestOption{tlsOpt, sasl}, "EXTERNAL:SASL_SSL,BROKER:PLAINTEXT"},
		{"sasl then tls", base, []testcontainers.CustomizeRequestOption{sasl, tlsOpt}, "EXTERNAL:SASL_SSL,BROKER:PLAINTEXT"},
		{"cluster node", base + ",CONTROLLER:PLAINTEXT", []testcontainers.CustomizeRequestOption{tlsOpt},
			"EXTERNAL:SSL,BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT"},
	} {
		req := apply(c.protocolMap, c.opts...)
		if got := req.Env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"]; got != c.want {
			t.Errorf("%s: protocol map %q, want %q", c.name, got, c.want)
		}
	}

	req := apply(base, tlsOpt)
	if got := req.Env["KAFKA_LISTENER_NAME_EXTERNAL_SSL_KEYSTORE_TYPE"]; got != "PEM" {
		t.Errorf("keystore type %q, want PEM", got)
	}
	if got := req.Env["KAFKA_LISTENER_NAME_EXTERNAL_SSL_KEYSTORE_LOCATION"]; got != "/tmp/logbook-tls.pem" {
		t.Errorf("keystore location %q, want /tmp/logbook-tls.pem", got)
	}
	if len(req.Files) != 1 || req.Files[0].ContainerFilePath != "/tmp/logbook-tls.pem" || req.Files[0].FileMode != 0o644 {
		t.Fatalf("files %+v, want one /tmp/logbook-tls.pem (0644)", req.Files)
	}
	content, err := io.ReadAll(req.Files[0].Reader)
	if err != nil {
		t.Fatal(err)
	}
	if string(content) != "KEY\nCHAIN\n" {
		t.Fatalf("keystore %q, want %q", content, "KEY\nCHAIN\n")
	}
}

// TestTLS: with WithTLS a client trusting the CA writes a record at offset 0 and reads it
// back over TLS; a client trusting another CA refuses the broker's certificate, and nothing it
// sent was written (the end offset is 0 until the trusted client produces).
func TestTLS(t *testing.T) {
	ctx := context.Background()
	pki := newPKI(t, "logbook-test-ca")
	other := newPKI(t, "other-ca")
	_, brokers := start(t, ctx, logbook.WithTLS(pki.certPEM, pki.keyPEM))

	trusted := newClient(t, kgo.SeedBrokers(brokers...), trusting(t, pki.caPEM))
	createTopic(t, ctx, trusted, "private", 1)

	untrusted := newClient(t, kgo.SeedBrokers(brokers...), trusting(t, other.caPEM),
		kgo.RecordDeliveryTimeout(5*time.Second))
	pingCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	assertUnknownAuthority(t, "untrusted ping", untrusted.Ping(pingCtx))
	produceCtx, cancelProduce := context.WithTimeout(ctx, 15*time.Second)
	defer cancelProduce()
	err := untrusted.ProduceSync(produceCtx, &kgo.Record{Topic: "private", Value: []byte("sneaky")}).FirstErr()
	if err == nil {
		t.Fatal("untrusted client: produce succeeded")
	}
	assertUnknownAuthority(t, "untrusted produce", err)
	if got := endOffset(t, ctx, trusted, "private"); got != 0 {
		t.Fatalf("end offset %d after the untrusted produce, want 0", got)
	}

	r := &kgo.Record{Topic: "private", Key: []byte("k"), Value: []byte("over tls")}
	if err := trusted.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("trusted produce: %v", err)
	}
	if r.Offset != 0 {
		t.Fatalf("trusted record at offset %d, want 0", r.Offset)
	}
	var got []string
	for _, rec := range readPartition(t, ctx, brokers, "private", 1, trusting(t, pki.caPEM)) {
		got = append(got, fmt.Sprintf("%d:%s=%s", rec.Offset, rec.Key, rec.Value))
	}
	if fmt.Sprint(got) != "[0:k=over tls]" {
		t.Fatalf("private holds %v, want [0:k=over tls]", got)
	}
	if got := endOffset(t, ctx, trusted, "private"); got != 1 {
		t.Fatalf("end offset %d, want 1", got)
	}
}

// TestSASLSSL: WithTLS with WithSASLPlainUser is SASL_SSL: the user over TLS writes at offset
// 0 and reads it back; the same user with a wrong password, over TLS, is refused by SASL.
func TestSASLSSL(t *testing.T) {
	ctx := context.Background()
	pki := newPKI(t, "logbook-test-ca")
	_, brokers := start(t, ctx, logbook.WithSASLPlainUser("alice", "secret"), logbook.WithTLS(pki.certPEM, pki.keyPEM))

	alice := []kgo.Opt{trusting(t, pki.caPEM), kgo.SASL(plain.Auth{User: "alice", Pass: "secret"}.AsMechanism())}
	cl := newClient(t, append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, alice...)...)
	createTopic(t, ctx, cl, "secured", 1)
	r := &kgo.Record{Topic: "secured", Value: []byte("v")}
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("alice produce: %v", err)
	}
	if r.Offset != 0 {
		t.Fatalf("alice's record at offset %d, want 0", r.Offset)
	}
	var got []string
	for _, rec := range readPartition(t, ctx, brokers, "secured", 1, alice...) {
		got = append(got, fmt.Sprintf("%d:%s", rec.Offset, rec.Value))
	}
	if fmt.Sprint(got) != "[0:v]" {
		t.Fatalf("secured holds %v, want [0:v]", got)
	}

	wrong := newClient(t, kgo.SeedBrokers(brokers...), trusting(t, pki.caPEM),
		kgo.SASL(plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism()))
	pingCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := wrong.Ping(pingCtx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password over TLS: ping answered %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}
