// Command go-txn drives franz-go's transactional producer and GroupTransactSession against a
// broker and checks, with exact counts, what Kafka promises: committed transactions are read
// once by read_committed, aborted ones only by read_uncommitted, consume-transform-produce
// commits its output and its input offsets together, and a second producer with the same
// transactional id fences the first. Prints one line per check and "N passed, N failed";
// exits 1 if any check failed. Run by scripts/clients-txn-test (go build ./txn).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

var passed, failed int

func check(ok bool, format string, args ...any) {
	status := "ok  "
	if ok {
		passed++
	} else {
		failed++
		status = "FAIL"
	}
	fmt.Printf("%s %s\n", status, fmt.Sprintf(format, args...))
}

func fatal(err error, what string) {
	if err != nil {
		fmt.Printf("FAIL %s: %v\n0 passed, 1 failed\n", what, err)
		os.Exit(1)
	}
}

// readAll returns the values of topic as a consumer at the isolation level sees them within 5 s.
func readAll(bootstrap, topic string, iso kgo.IsolationLevel) []string {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fatal(err, "consumer")
	defer cl.Close()
	var values []string
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { values = append(values, string(r.Value)) })
	}
	return values
}

func main() {
	bootstrap := os.Args[1]
	ctx := context.Background()
	topic := fmt.Sprintf("go-txn-%d", time.Now().UnixNano())
	admin, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	fatal(err, "admin client")
	defer admin.Close()
	adm := kadm.NewClient(admin)
	_, err = adm.CreateTopic(ctx, 3, 1, nil, topic)
	fatal(err, "create topic")
	_, err = adm.CreateTopic(ctx, 1, 1, nil, topic+"-out")
	fatal(err, "create output topic")

	// Three transactions of 10 records over 3 partitions (i % 3): commit, abort, commit.
	producer, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.TransactionalID("go-"+topic),
		kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	fatal(err, "producer")
	for round, commit := range []bool{true, false, true} {
		fatal(producer.BeginTransaction(), "begin")
		for i := 0; i < 10; i++ {
			r := &kgo.Record{Value: []byte(fmt.Sprintf("r%d-%d", round, i)), Partition: int32(i % 3)}
			fatal(producer.ProduceSync(ctx, r).FirstErr(), "produce")
		}
		fatal(producer.EndTransaction(ctx, kgo.TransactionEndTry(commit)), "end transaction")
	}
	committed := readAll(bootstrap, topic, kgo.ReadCommitted())
	check(len(committed) == 20, "read_committed sees the 2 committed transactions: %d records (want 20)", len(committed))
	for _, v := range committed {
		if v[:2] == "r1" {
			check(false, "read_committed saw aborted record %s", v)
			break
		}
	}
	uncommitted := readAll(bootstrap, topic, kgo.ReadUncommitted())
	check(len(uncommitted) == 30, "read_uncommitted sees all 3: %d records (want 30)", len(uncommitted))

	// Fencing: a second producer with the same transactional id; the first one's next
	// transaction must fail with a fencing error.
	second, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.TransactionalID("go-"+topic),
		kgo.DefaultProduceTopic(topic))
	fatal(err, "second producer")
	fatal(second.BeginTransaction(), "second begin")
	fatal(second.ProduceSync(ctx, &kgo.Record{Value: []byte("second")}).FirstErr(), "second produce")
	fatal(second.EndTransaction(ctx, kgo.TryCommit), "second commit")
	fenceErr := producer.BeginTransaction()
	if fenceErr == nil {
		fenceErr = producer.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie")}).FirstErr()
		if fenceErr == nil {
			fenceErr = producer.EndTransaction(ctx, kgo.TryCommit)
		}
	}
	check(errors.Is(fenceErr, kerr.ProducerFenced) || errors.Is(fenceErr, kerr.InvalidProducerEpoch),
		"the first producer is fenced: %v", fenceErr)
	producer.Close()
	second.Close()

	// Consume-transform-produce: every committed input record becomes one output record, and
	// the group's offsets are committed in the same transactions.
	group := "go-group-" + topic
	session, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(bootstrap), kgo.TransactionalID("go-gts-"+topic),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic(topic+"-out"))
	fatal(err, "group transact session")
	consumed := 0
	for deadline := time.Now().Add(30 * time.Second); consumed < 21 && time.Now().Before(deadline); {
		pollCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fetches := session.PollFetches(pollCtx)
		cancel()
		if fetches.NumRecords() == 0 {
			continue
		}
		fatal(session.Begin(), "session begin")
		fetches.EachRecord(func(r *kgo.Record) {
			consumed++
			session.Produce(ctx, &kgo.Record{Value: append([]byte("out-"), r.Value...)}, nil)
		})
		ok, err := session.End(ctx, kgo.TryCommit)
		fatal(err, "session end")
		check(ok, "a consume-transform-produce transaction committed (%d consumed so far)", consumed)
	}
	session.Close()
	out := readAll(bootstrap, topic+"-out", kgo.ReadCommitted())
	check(len(out) == 21, "output read_committed: %d records (want 21)", len(out))
	offsets, err := adm.FetchOffsets(ctx, group)
	fatal(err, "fetch offsets")
	ends, err := adm.ListEndOffsets(ctx, topic)
	fatal(err, "list end offsets")
	offsets.Each(func(o kadm.OffsetResponse) {
		end, _ := ends.Lookup(o.Topic, o.Partition)
		// The last record of each partition is followed by its transaction's marker.
		check(o.At == end.Offset-1, "group offset of %s-%d is %d: after the last record, before its marker (end %d)",
			o.Topic, o.Partition, o.At, end.Offset)
	})
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		os.Exit(1)
	}
}
