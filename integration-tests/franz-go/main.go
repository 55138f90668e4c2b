// franz-go (kgo + kadm) compatibility probe for Logbook.
//
//	go run . HOST:PORT
//
// Steps: create topic, idempotent produce, group consume+commit, restart
// resumes at committed end, list offsets (earliest/latest/timestamp), delete.
// kgo debug logging (every request written, with its version) goes to stderr.
package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	N = 300
	P = 3
)

var (
	bootstrap = "127.0.0.1:9092"
	suffix    = fmt.Sprintf("%d-%d", time.Now().UnixMilli(), rand.Intn(1000000))
	topic     = "probe-franzgo-" + suffix
	group     = "g-franzgo-" + suffix
	baseTs    = time.Now().Add(-1000 * time.Second).UnixMilli() // record i: baseTs + i*1000
	passed    int
	failed    int
	logger    = kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, func() string { return time.Now().Format("15:04:05.000000 ") })
)

func key(i int) string   { return fmt.Sprintf("key-%d", i) }
func value(i int) string { return fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", i%17)) }
func perPart(p int) int  { return (N - p + P - 1) / P }

func step(name string, timeout time.Duration, fn func(ctx context.Context) error) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	t0 := time.Now()
	err := fn(ctx)
	if err == nil {
		passed++
		fmt.Printf("PASS %s (%d ms)\n", name, time.Since(t0).Milliseconds())
		return true
	}
	failed++
	fmt.Printf("FAIL %s (%d ms): %v (%T)\n", name, time.Since(t0).Milliseconds(), err, errors.Unwrap(err))
	fmt.Fprintf(os.Stderr, "#### FAIL %s: %v\n", name, err)
	return false
}

func opts(extra ...kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(bootstrap),
		kgo.ClientID("logbook-probe-franzgo"),
		kgo.WithLogger(logger),
		kgo.RequestRetries(3),
		kgo.RetryTimeout(15 * time.Second),
	}, extra...)
}

func main() {
	if len(os.Args) > 1 {
		bootstrap = os.Args[1]
	}
	fmt.Printf("franz-go probe: bootstrap=%s topic=%s group=%s\n", bootstrap, topic, group)
	acl, err := kgo.NewClient(opts()...)
	if err != nil {
		fmt.Println("FAIL setup:", err)
		os.Exit(1)
	}
	adm := kadm.NewClient(acl)
	defer adm.Close()

	step("1 create topic (3 partitions)", 20*time.Second, func(ctx context.Context) error {
		res, err := adm.CreateTopics(ctx, P, 1, nil, topic)
		if err != nil {
			return fmt.Errorf("CreateTopics: %w", err)
		}
		if r := res[topic]; r.Err != nil {
			return fmt.Errorf("CreateTopics %s: %w (%s)", topic, r.Err, r.ErrMessage)
		}
		md, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return fmt.Errorf("ListTopics: %w", err)
		}
		if n := len(md[topic].Partitions); n != P {
			return fmt.Errorf("metadata shows %d partitions (err %v)", n, md[topic].Err)
		}
		return nil
	})

	step("2 produce 300 keyed records with header (idempotent)", 20*time.Second, func(ctx context.Context) error {
		pcl, err := kgo.NewClient(opts(
			kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence is kgo's default
		)...)
		if err != nil {
			return err
		}
		defer pcl.Close()
		for b := 0; b < 3; b++ {
			recs := make([]*kgo.Record, 0, 100)
			for i := b * 100; i < (b+1)*100; i++ {
				recs = append(recs, &kgo.Record{
					Key: []byte(key(i)), Value: []byte(value(i)), Partition: int32(i % P),
					Timestamp: time.UnixMilli(baseTs + int64(i)*1000),
					Headers:   []kgo.RecordHeader{{Key: "probe-idx", Value: []byte(fmt.Sprint(i))}, {Key: "probe-client", Value: []byte("franz-go")}},
				})
			}
			results := pcl.ProduceSync(ctx, recs...)
			if err := results.FirstErr(); err != nil {
				return fmt.Errorf("batch %d: %w", b, err)
			}
			for _, r := range results {
				var i int
				fmt.Sscan(string(r.Record.Headers[0].Value), &i)
				if r.Record.Partition != int32(i%P) || r.Record.Offset != int64(i/P) {
					return fmt.Errorf("record %d produced at p%d@%d, expected p%d@%d", i, r.Record.Partition, r.Record.Offset, i%P, i/P)
				}
				if r.Record.ProducerID < 0 {
					return fmt.Errorf("record %d: producer id %d (not idempotent)", i, r.Record.ProducerID)
				}
			}
		}
		return nil
	})

	// runConsumer joins the group, reads until `expect` records (or until
	// assigned + idle when expect == 0), commits what it read, leaves.
	runConsumer := func(ctx context.Context, expect int, idle time.Duration) ([]*kgo.Record, error) {
		var assigned atomic.Bool
		ccl, err := kgo.NewClient(opts(
			kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DisableAutoCommit(),
			kgo.FetchMaxWait(500*time.Millisecond),
			kgo.SessionTimeout(10*time.Second),
			kgo.HeartbeatInterval(time.Second),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				fmt.Printf("     assigned: %v\n", m)
				assigned.Store(true)
			}),
		)...)
		if err != nil {
			return nil, err
		}
		defer ccl.Close() // LeaveGroup
		var got []*kgo.Record
		var idleUntil time.Time
		for {
			if expect > 0 && len(got) >= expect && idleUntil.IsZero() {
				idleUntil = time.Now().Add(idle)
			}
			if expect == 0 && assigned.Load() && idleUntil.IsZero() {
				idleUntil = time.Now().Add(idle)
			}
			if !idleUntil.IsZero() && time.Now().After(idleUntil) {
				break
			}
			pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			fs := ccl.PollFetches(pctx)
			cancel()
			if ctx.Err() != nil {
				return got, fmt.Errorf("gave up with %d records (assigned=%v): %w", len(got), assigned.Load(), ctx.Err())
			}
			var ferr error
			fs.EachError(func(t string, p int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					ferr = fmt.Errorf("fetch error %s[%d]: %w", t, p, err)
				}
			})
			if ferr != nil {
				return got, ferr
			}
			got = append(got, fs.Records()...)
		}
		if len(got) > 0 {
			if err := ccl.CommitUncommittedOffsets(ctx); err != nil {
				return got, fmt.Errorf("commit: %w", err)
			}
		}
		return got, nil
	}

	step("3 group consume 300, check key/value/header/offset, commit", 45*time.Second, func(ctx context.Context) error {
		got, err := runConsumer(ctx, N, 1500*time.Millisecond)
		if err != nil {
			return err
		}
		if len(got) != N {
			return fmt.Errorf("received %d records, expected %d", len(got), N)
		}
		byPart := map[int32][]*kgo.Record{}
		for _, r := range got {
			byPart[r.Partition] = append(byPart[r.Partition], r)
		}
		for p := 0; p < P; p++ {
			rs := byPart[int32(p)]
			if len(rs) != perPart(p) {
				return fmt.Errorf("p%d: %d records, expected %d", p, len(rs), perPart(p))
			}
			for j, r := range rs {
				i := j*P + p
				if r.Offset != int64(j) {
					return fmt.Errorf("p%d record #%d has offset %d", p, j, r.Offset)
				}
				if string(r.Key) != key(i) || string(r.Value) != value(i) {
					return fmt.Errorf("p%d@%d key/value %q/%q", p, j, r.Key, r.Value)
				}
				if len(r.Headers) != 2 || r.Headers[0].Key != "probe-idx" || string(r.Headers[0].Value) != fmt.Sprint(i) || r.Headers[1].Key != "probe-client" || string(r.Headers[1].Value) != "franz-go" {
					return fmt.Errorf("p%d@%d headers %+v", p, j, r.Headers)
				}
				if r.Timestamp.UnixMilli() != baseTs+int64(i)*1000 {
					return fmt.Errorf("p%d@%d timestamp %d expected %d", p, j, r.Timestamp.UnixMilli(), baseTs+int64(i)*1000)
				}
			}
		}
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return fmt.Errorf("FetchOffsets: %w", err)
		}
		for p := 0; p < P; p++ {
			o, ok := offs.Lookup(topic, int32(p))
			if !ok || o.Err != nil || o.At != int64(perPart(p)) {
				return fmt.Errorf("committed offset p%d = %+v (found %v)", p, o, ok)
			}
		}
		return nil
	})

	step("4 restart consumer in same group receives nothing more", 45*time.Second, func(ctx context.Context) error {
		got, err := runConsumer(ctx, 0, 3*time.Second)
		if err != nil {
			return err
		}
		if len(got) != 0 {
			return fmt.Errorf("received %d records after restart, first p%d@%d", len(got), got[0].Partition, got[0].Offset)
		}
		return nil
	})

	step("5 list offsets earliest/latest/by timestamp", 20*time.Second, func(ctx context.Context) error {
		check := func(what string, l kadm.ListedOffsets, err error, want func(p int) int64) error {
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if e := l.Error(); e != nil {
				return fmt.Errorf("%s: %w", what, e)
			}
			for p := 0; p < P; p++ {
				o, ok := l.Lookup(topic, int32(p))
				if !ok || o.Offset != want(p) {
					return fmt.Errorf("%s p%d = %+v, expected %d", what, p, o, want(p))
				}
			}
			return nil
		}
		s, err := adm.ListStartOffsets(ctx, topic)
		if e := check("earliest", s, err, func(int) int64 { return 0 }); e != nil {
			return e
		}
		e, err := adm.ListEndOffsets(ctx, topic)
		if e := check("latest", e, err, func(p int) int64 { return int64(perPart(p)) }); e != nil {
			return e
		}
		// first record with index >= 151: p0 -> 153 (offset 51), p1 -> 151 (50), p2 -> 152 (50)
		t, err := adm.ListOffsetsAfterMilli(ctx, baseTs+151*1000, topic)
		if e := check("after ts", t, err, func(p int) int64 { return []int64{51, 50, 50}[p] }); e != nil {
			return e
		}
		t0, err := adm.ListOffsetsAfterMilli(ctx, baseTs-5000, topic)
		if e := check("after ts before all", t0, err, func(int) int64 { return 0 }); e != nil {
			return e
		}
		// timestamp after every record: Kafka answers offset -1; kadm maps that to the end offset
		tf, err := adm.ListOffsetsAfterMilli(ctx, baseTs+10_000_000, topic)
		if e := check("after ts past all", tf, err, func(p int) int64 { return int64(perPart(p)) }); e != nil {
			return e
		}
		return nil
	})

	step("6 delete topic", 20*time.Second, func(ctx context.Context) error {
		res, err := adm.DeleteTopics(ctx, topic)
		if err != nil {
			return fmt.Errorf("DeleteTopics: %w", err)
		}
		if r := res[topic]; r.Err != nil {
			return fmt.Errorf("DeleteTopics %s: %w (%v)", topic, r.Err, r.ErrMessage)
		}
		for k := 0; k < 20; k++ {
			td, err := adm.ListTopics(ctx)
			if err != nil {
				return fmt.Errorf("ListTopics: %w", err)
			}
			if !td.Has(topic) {
				names := td.Names()
				sort.Strings(names)
				return nil
			}
			time.Sleep(250 * time.Millisecond)
		}
		return fmt.Errorf("topic still listed after delete")
	})

	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		os.Exit(1)
	}
}
