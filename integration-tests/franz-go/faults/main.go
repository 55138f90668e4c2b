// Command go-faults drives franz-go against a broker started with --fault-injection and checks,
// with exact counts, that each injected fault makes the client do what Kafka's real failure
// makes it do: an idempotent producer retries NOT_LEADER_OR_FOLLOWER and a timed-out
// request without losing or duplicating a record, a produce to a leaderless partition waits
// until it has a leader again, a group consumer rides out an unavailable coordinator, a
// dropped connection and a forced rebalance without losing or repeating a record, and a
// fenced transactional producer cannot commit. Prints one line per check and
// "N passed, N failed"; exits 1 if any check failed.
//
// Usage: go-faults <bootstrap> <fault-url>, e.g. go-faults 127.0.0.1:9092 http://127.0.0.1:9644
// (the broker's metrics listener, which serves /faults).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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
		fmt.Printf("FAIL %s: %v\n%d passed, %d failed\n", what, err, passed, failed+1)
		os.Exit(1)
	}
}

// faultAPI is the broker's fault-injection admin API.
type faultAPI struct{ url string }

type fault struct {
	ID       uint64 `json:"id"`
	Injected uint64 `json:"injected"`
	Armed    bool   `json:"armed"`
	Outcome  string `json:"outcome"`
	Error    string `json:"error"`
}

func (f faultAPI) do(method, path string, body any) (int, []byte) {
	var reader io.Reader
	if body != nil {
		encoded, err := json.Marshal(body)
		fatal(err, "encode fault spec")
		reader = bytes.NewReader(encoded)
	}
	req, err := http.NewRequest(method, f.url+path, reader)
	fatal(err, method+" "+path)
	req.Header.Set("Content-Type", "application/json")
	client := http.Client{Timeout: 40 * time.Second}
	resp, err := client.Do(req)
	fatal(err, method+" "+path)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	fatal(err, method+" "+path+" body")
	return resp.StatusCode, data
}

// post arms (or runs) a fault; a refusal is fatal.
func (f faultAPI) post(spec map[string]any) fault {
	status, data := f.do("POST", "/faults", spec)
	var view fault
	_ = json.Unmarshal(data, &view)
	if status != http.StatusOK {
		fatal(fmt.Errorf("status %d: %s", status, strings.TrimSpace(string(data))), fmt.Sprintf("POST /faults %v", spec))
	}
	return view
}

func (f faultAPI) injected(id uint64) uint64 {
	status, data := f.do("GET", "/faults", nil)
	if status != http.StatusOK {
		fatal(fmt.Errorf("status %d: %s", status, data), "GET /faults")
	}
	var views []fault
	fatal(json.Unmarshal(data, &views), "GET /faults: decode")
	for _, v := range views {
		if v.ID == id {
			return v.Injected
		}
	}
	fatal(fmt.Errorf("fault %d not listed in %s", id, data), "GET /faults")
	return 0
}

func (f faultAPI) clear() {
	status, data := f.do("DELETE", "/faults", nil)
	if status != http.StatusOK {
		fatal(fmt.Errorf("status %d: %s", status, data), "DELETE /faults")
	}
}

// readErrors counts, per API key, the requests whose response a client failed to read
// (connection closed or broken): a kgo.HookBrokerRead.
type readErrors struct {
	mu    sync.Mutex
	byKey map[int16]int
}

func (h *readErrors) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		h.mu.Lock()
		h.byKey[key]++
		h.mu.Unlock()
	}
}

func (h *readErrors) of(key int16) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.byKey[key]
}

type rec struct {
	offset int64
	value  string
}

// readN reads topic from the start at the isolation level until it holds want records (or
// timeout passes), then polls a little longer to catch any record beyond them.
func readN(bootstrap, topic string, iso kgo.IsolationLevel, want int, timeout time.Duration) []rec {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	fatal(err, "consumer")
	defer cl.Close()
	var got []rec
	deadline := time.Now().Add(timeout)
	extra := time.Time{}
	for {
		end := deadline
		if !extra.IsZero() {
			end = extra
		}
		if !time.Now().Before(end) {
			return got
		}
		ctx, cancel := context.WithDeadline(context.Background(), end)
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, rec{r.Offset, string(r.Value)}) })
		cancel()
		if len(got) >= want && extra.IsZero() {
			extra = time.Now().Add(700 * time.Millisecond)
		}
	}
}

// inOrder says whether recs are exactly values prefix0..prefix(n-1) at offsets 0..n-1.
func inOrder(recs []rec, prefix string, n int) bool {
	if len(recs) != n {
		return false
	}
	for i, r := range recs {
		if r.offset != int64(i) || r.value != fmt.Sprintf("%s%d", prefix, i) {
			return false
		}
	}
	return true
}

func describe(recs []rec) string {
	if len(recs) > 12 {
		return fmt.Sprintf("%v … %v", recs[:5], recs[len(recs)-5:])
	}
	return fmt.Sprintf("%v", recs)
}

func produceValues(cl *kgo.Client, topic, prefix string, from, to int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var records []*kgo.Record
	for i := from; i < to; i++ {
		records = append(records, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("%s%d", prefix, i))})
	}
	return cl.ProduceSync(ctx, records...).FirstErr()
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: go-faults <bootstrap> <fault-url>")
		os.Exit(2)
	}
	bootstrap := os.Args[1]
	faults := faultAPI{strings.TrimRight(os.Args[2], "/")}
	ctx := context.Background()

	admin, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	fatal(err, "admin client")
	defer admin.Close()
	adm := kadm.NewClient(admin)
	for _, topic := range []string{"fg-produce", "fg-moving", "fg-consume", "fg-txn"} {
		resp, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
		if err == nil {
			err = resp.Err
		}
		fatal(err, "create topic "+topic)
	}
	faults.clear()

	// 1. NOT_LEADER_OR_FOLLOWER three times: the idempotent producer refreshes its metadata
	//    and retries; every record lands once, in order.
	nl := faults.post(map[string]any{"kind": "error", "api": "Produce", "topic": "fg-produce", "partition": 0,
		"error": "NOT_LEADER_OR_FOLLOWER", "count": 3})
	producer, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.MetadataMinAge(250*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	fatal(err, "producer")
	err = produceValues(producer, "fg-produce", "v", 0, 10)
	check(err == nil, "1. 10 records produced through 3 NOT_LEADER_OR_FOLLOWER answers: err=%v", err)
	producer.Close()
	got := readN(bootstrap, "fg-produce", kgo.ReadUncommitted(), 10, 10*time.Second)
	check(inOrder(got, "v", 10), "1. fg-produce holds v0..v9 at offsets 0..9 once each: %s", describe(got))
	n := faults.injected(nl.ID)
	check(n == 3, "1. the NOT_LEADER_OR_FOLLOWER fault acted %d times (want 3)", n)
	faults.clear()

	// 2. A Produce answered after 3 s while the client gives up after 1 s + 1 s overhead: the
	//    client kills the connection and resends the batch, which the broker already wrote; the
	//    idempotent sequence numbers keep it from being written twice.
	delay := faults.post(map[string]any{"kind": "delay", "api": "Produce", "delay_ms": 3000, "count": 1})
	producerErrs := &readErrors{byKey: map[int16]int{}}
	producer, err = kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.WithHooks(producerErrs), kgo.ProduceRequestTimeout(1*time.Second),
		kgo.RequestTimeoutOverhead(1*time.Second), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	fatal(err, "producer with a 1 s produce timeout")
	began := time.Now()
	err = produceValues(producer, "fg-produce", "v", 10, 20)
	took := time.Since(began)
	check(err == nil, "2. 10 more records produced through a 3 s response delay: err=%v (took %v)", err, took.Round(time.Millisecond))
	timedOut := producerErrs.of(int16(kmsg.Produce))
	check(timedOut == 1, "2. the delayed Produce timed out on the client and its batch was resent: %d Produce reads failed (want 1)", timedOut)
	producer.Close()
	got = readN(bootstrap, "fg-produce", kgo.ReadUncommitted(), 20, 10*time.Second)
	check(inOrder(got, "v", 20), "2. fg-produce holds v0..v19 at offsets 0..19 once each: %s", describe(got))
	n = faults.injected(delay.ID)
	check(n == 1, "2. the delay fault acted %d times (want 1)", n)
	faults.clear()

	// 3. A partition with no leader: the produce waits (the client keeps the record buffered
	//    and reloads metadata) and completes once the partition has its leader back.
	unavailable := faults.post(map[string]any{"kind": "partition_unavailable", "topic": "fg-moving"})
	producer, err = kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.MetadataMinAge(250*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	fatal(err, "producer")
	type result struct {
		offset int64
		err    error
		at     time.Time
	}
	done := make(chan result, 1)
	produceCtx, cancelProduce := context.WithTimeout(ctx, 30*time.Second)
	producer.Produce(produceCtx, &kgo.Record{Topic: "fg-moving", Value: []byte("moved")}, func(r *kgo.Record, err error) {
		done <- result{r.Offset, err, time.Now()}
	})
	select {
	case r := <-done:
		check(false, "3. a produce to a leaderless partition waits: it completed within 2 s (offset %d, err %v)", r.offset, r.err)
		done <- r
	case <-time.After(2 * time.Second):
		check(true, "3. a produce to a leaderless partition is still waiting after 2 s")
	}
	status, data := faults.do("DELETE", fmt.Sprintf("/faults/%d", unavailable.ID), nil)
	check(status == http.StatusOK, "3. DELETE /faults/%d: %d %s", unavailable.ID, status, strings.TrimSpace(string(data)))
	cleared := time.Now()
	select {
	case r := <-done:
		check(r.err == nil && r.offset == 0, "3. once the leader is back the produce completes at offset %d (want 0), err=%v, %v after the clear",
			r.offset, r.err, r.at.Sub(cleared).Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		check(false, "3. the produce did not complete within 20 s of the leader coming back")
	}
	cancelProduce()
	producer.Close()
	got = readN(bootstrap, "fg-moving", kgo.ReadUncommitted(), 1, 10*time.Second)
	check(len(got) == 1 && got[0].offset == 0 && got[0].value == "moved", "3. fg-moving holds exactly 1 record: %s", describe(got))
	faults.clear()

	// 4. A group consumer: the coordinator is unavailable twice and its first Fetch's connection
	//    is dropped; it still reads every record once. A forced rebalance gives it a second
	//    assignment, after which it goes on reading from its committed position.
	producer, err = kgo.NewClient(kgo.SeedBrokers(bootstrap))
	fatal(err, "producer")
	fatal(produceValues(producer, "fg-consume", "c", 0, 5), "produce 5 to fg-consume")
	// What the client is answered: FindCoordinator (as franz-go sends it, v4+ with
	// CoordinatorKeys) must come back with the error in its Coordinators entry, not as a
	// closed connection. No retries, so the answer seen is the faulted one.
	faults.post(map[string]any{"kind": "error", "api": "FindCoordinator", "group": "fg-probe",
		"error": "COORDINATOR_NOT_AVAILABLE", "count": 1})
	raw1, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.RequestRetries(0))
	fatal(err, "raw client")
	findReq := kmsg.NewPtrFindCoordinatorRequest()
	findReq.CoordinatorKey = "fg-probe"
	findReq.CoordinatorKeys = []string{"fg-probe"}
	findCtx, cancelFind := context.WithTimeout(ctx, 5*time.Second)
	findResp, findErr := findReq.RequestWith(findCtx, raw1)
	cancelFind()
	raw1.Close()
	if findErr != nil {
		check(false, "4. FindCoordinator(fg-probe) under an error fault is answered: request failed: %v", findErr)
	} else {
		code, entries := findResp.ErrorCode, len(findResp.Coordinators)
		if findResp.Version >= 4 && entries == 1 {
			code = findResp.Coordinators[0].ErrorCode
		}
		check(code == kerr.CoordinatorNotAvailable.Code, "4. FindCoordinator v%d (fg-probe) under an error fault is answered with error code %d (want %d, COORDINATOR_NOT_AVAILABLE), %d coordinator entries",
			findResp.Version, code, kerr.CoordinatorNotAvailable.Code, entries)
	}
	faults.clear()

	coord := faults.post(map[string]any{"kind": "error", "api": "FindCoordinator", "group": "fg-group",
		"error": "COORDINATOR_NOT_AVAILABLE", "count": 2})
	drop := faults.post(map[string]any{"kind": "drop_connection", "api": "Fetch", "count": 1})
	var assigned atomic.Int32
	consumerErrs := &readErrors{byKey: map[int16]int{}}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.WithHooks(consumerErrs),
		kgo.ConsumerGroup("fg-group"), kgo.ConsumeTopics("fg-consume"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond),
		kgo.HeartbeatInterval(500*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 200 * time.Millisecond }),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { assigned.Add(1) }))
	fatal(err, "group consumer")
	seen := map[string]int{}
	var order []string
	poll := func(want int, timeout time.Duration, until func() bool) {
		deadline := time.Now().Add(timeout)
		for time.Now().Before(deadline) && (len(order) < want || (until != nil && !until())) {
			pollCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			fetches := consumer.PollFetches(pollCtx)
			cancel()
			fetches.EachRecord(func(r *kgo.Record) {
				seen[string(r.Value)]++
				order = append(order, string(r.Value))
			})
		}
	}
	poll(5, 20*time.Second, nil)
	poll(0, 700*time.Millisecond, func() bool { return false }) // catch any duplicate
	exactlyOnce := func(n int) bool {
		if len(order) != n || len(seen) != n {
			return false
		}
		for i := 0; i < n; i++ {
			if seen[fmt.Sprintf("c%d", i)] != 1 {
				return false
			}
		}
		return true
	}
	check(exactlyOnce(5), "4. the group consumer read c0..c4 once each through the faults: %v", order)
	n = faults.injected(coord.ID)
	check(n == 2, "4. the COORDINATOR_NOT_AVAILABLE fault acted %d times (want 2)", n)
	n = faults.injected(drop.ID)
	check(n == 1, "4. the Fetch drop_connection fault acted %d times (want 1)", n)
	lostFind, lostFetch := consumerErrs.of(int16(kmsg.FindCoordinator)), consumerErrs.of(int16(kmsg.Fetch))
	check(lostFind == 0, "4. the consumer's FindCoordinator requests were all answered (an error answer, not a lost connection): %d lost (want 0)", lostFind)
	check(lostFetch == 1, "4. the consumer lost exactly its one dropped Fetch: %d lost (want 1)", lostFetch)
	faults.clear()
	before := assigned.Load()
	check(before == 1, "4. one assignment so far: %d", before)
	status, data = faults.do("POST", "/faults", map[string]any{"kind": "rebalance", "group": "fg-group"})
	var reb fault
	_ = json.Unmarshal(data, &reb)
	check(status == http.StatusOK && reb.Outcome == "group fg-group is rebalancing",
		"4. POST rebalance: %d %s", status, strings.TrimSpace(string(data)))
	rebalanced := time.Now()
	poll(0, 15*time.Second, func() bool { return assigned.Load() > before })
	check(assigned.Load() == before+1, "4. the consumer got a second assignment %v after the forced rebalance (assignments: %d)",
		time.Since(rebalanced).Round(time.Millisecond), assigned.Load())
	fatal(produceValues(producer, "fg-consume", "c", 5, 10), "produce 5 more to fg-consume")
	poll(10, 15*time.Second, nil)
	poll(0, 700*time.Millisecond, func() bool { return false })
	check(exactlyOnce(10), "4. after the rebalance it read c5..c9 too, 10 records once each: %v", order)
	consumer.Close()
	producer.Close()
	faults.clear()

	// 5. Fencing: the transactional id gets a new epoch while a transaction is open; the
	//    commit fails with a fencing error and read_committed sees none of its records.
	txn, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.TransactionalID("fg-tx"), kgo.DefaultProduceTopic("fg-txn"))
	fatal(err, "transactional producer")
	fatal(txn.BeginTransaction(), "begin transaction")
	txn.Produce(ctx, &kgo.Record{Value: []byte("t0")}, nil)
	txn.Produce(ctx, &kgo.Record{Value: []byte("t1")}, nil)
	fatal(txn.Flush(ctx), "flush the transaction's records")
	status, data = faults.do("POST", "/faults", map[string]any{"kind": "fence", "transactional_id": "fg-tx"})
	var fence fault
	_ = json.Unmarshal(data, &fence)
	check(status == http.StatusOK && strings.Contains(fence.Outcome, "epoch"), "5. POST fence: %d %s", status, strings.TrimSpace(string(data)))
	endCtx, cancelEnd := context.WithTimeout(ctx, 15*time.Second)
	endErr := txn.EndTransaction(endCtx, kgo.TryCommit)
	cancelEnd()
	check(errors.Is(endErr, kerr.ProducerFenced) || errors.Is(endErr, kerr.InvalidProducerEpoch),
		"5. the fenced producer's commit fails with a fencing error: %v", endErr)
	txn.Close()
	// A record after the aborted transaction: read_committed must get past it to this one.
	producer, err = kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.DefaultProduceTopic("fg-txn"))
	fatal(err, "producer")
	fatal(producer.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(), "produce after the fence")
	producer.Close()
	got = readN(bootstrap, "fg-txn", kgo.ReadCommitted(), 1, 10*time.Second)
	check(len(got) == 1 && got[0].value == "after", "5. read_committed sees none of the fenced transaction's records, only the later one: %s", describe(got))
	raw := readN(bootstrap, "fg-txn", kgo.ReadUncommitted(), 3, 10*time.Second)
	check(len(raw) == 3 && raw[0].value == "t0" && raw[1].value == "t1" && raw[2].value == "after",
		"5. read_uncommitted sees the 2 aborted records and the later one: %s", describe(raw))

	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		os.Exit(1)
	}
}
