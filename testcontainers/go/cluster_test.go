package logbook_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	logbook "github.com/logbook-dev/logbook/testcontainers/go"
)

// leaderOf is the node id metadata names as the leader of partition 0 of topic.
func leaderOf(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) int32 {
	t.Helper()
	topics, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		t.Fatalf("describe %s: %v", topic, err)
	}
	p, ok := topics[topic].Partitions[0]
	if !ok || topics[topic].Err != nil || p.Err != nil {
		t.Fatalf("describe %s: %+v", topic, topics[topic])
	}
	return p.Leader
}

// kill stops node's container the way a crash does: SIGKILL (docker kill), no graceful
// shutdown, nothing flushed or handed over.
func kill(t *testing.T, ctx context.Context, node *logbook.LogbookContainer) {
	t.Helper()
	docker, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		t.Fatalf("docker client: %v", err)
	}
	defer docker.Close()
	if _, err := docker.ContainerKill(ctx, node.GetContainerID(), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatalf("kill %s: %v", node.GetContainerID(), err)
	}
}

// produceRange sends v<from>..v<to-1> one at a time to partition 0 of topic and fails unless
// each is acknowledged at the offset equal to its number.
func produceRange(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		r := &kgo.Record{Topic: topic, Partition: 0, Key: []byte("k"), Value: fmt.Appendf(nil, "v%d", i)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce v%d: %v", i, err)
		}
		if r.Offset != int64(i) {
			t.Fatalf("v%d acknowledged at offset %d, want %d", i, r.Offset, i)
		}
	}
}

// TestClusterLosesNothingAcknowledgedWhenTheLeaderIsKilled, as Java's LogbookClusterTest: three
// nodes, a topic with replication factor 3 and min.insync.replicas=2, 100 acks=all idempotent
// records at offsets 0..99; the partition's leader is killed; 100 more land at 100..199; the
// survivors elect another leader and hold exactly v0..v199 at offsets 0..199.
func TestClusterLosesNothingAcknowledgedWhenTheLeaderIsKilled(t *testing.T) {
	ctx := context.Background()
	began := time.Now()
	cluster, err := logbook.RunCluster(ctx, image(), 3)
	t.Cleanup(func() {
		if err := cluster.Terminate(context.Background()); err != nil {
			t.Errorf("terminate cluster: %v", err)
		}
	})
	if err != nil {
		t.Fatalf("run cluster: %v", err)
	}
	brokers, err := cluster.Brokers(ctx)
	if err != nil {
		t.Fatalf("brokers: %v", err)
	}
	t.Logf("3 nodes at %v, started in %v", brokers, time.Since(began).Round(time.Millisecond))
	if len(brokers) != 3 {
		t.Fatalf("brokers %v, want 3", brokers)
	}
	if got := strings.Join(cluster.NetworkBrokers(), ","); got != "logbook-1:9093,logbook-2:9093,logbook-3:9093" {
		t.Fatalf("network brokers %s", got)
	}
	if got := strings.Join(cluster.Node(2).NetworkBrokers(), ","); got != "logbook-2:9093" {
		t.Fatalf("node 2 advertises %s to the network, want logbook-2:9093", got)
	}
	assertNodeEnv(t, ctx, cluster.Node(2), map[string]string{
		"KAFKA_NODE_ID":                                  "2",
		"KAFKA_PROCESS_ROLES":                            "broker,controller",
		"KAFKA_LISTENERS":                                "EXTERNAL://0.0.0.0:9092,BROKER://0.0.0.0:9093,CONTROLLER://0.0.0.0:9094",
		"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":           "EXTERNAL:PLAINTEXT,BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"KAFKA_INTER_BROKER_LISTENER_NAME":               "BROKER",
		"KAFKA_CONTROLLER_LISTENER_NAMES":                "CONTROLLER",
		"KAFKA_CONTROLLER_QUORUM_VOTERS":                 "1@logbook-1:9094,2@logbook-2:9094,3@logbook-3:9094",
		"KAFKA_DEFAULT_REPLICATION_FACTOR":               "3",
		"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":         "3",
		"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "3",
		"KAFKA_MIN_INSYNC_REPLICAS":                      "2",
	})

	admin := newClient(t, kgo.SeedBrokers(brokers...))
	resp, err := kadm.NewClient(admin).CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, "replicated")
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}

	// franz-go's producer is idempotent unless told otherwise; acks=all is spelled out.
	// MetadataMinAge only makes it look for the new leader sooner than its default 5 s.
	producer := newClient(t, kgo.SeedBrokers(brokers...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(60*time.Second),
		kgo.MetadataMinAge(250*time.Millisecond))
	produceRange(t, ctx, producer, "replicated", 0, 100)

	leader := leaderOf(t, ctx, admin, "replicated")
	doomed := cluster.Node(int(leader))
	if doomed == nil {
		t.Fatalf("leader %d is no node of the cluster", leader)
	}
	// Its address, while Docker still maps its port (a killed container has no mapping).
	doomedBrokers, err := doomed.Brokers(ctx)
	if err != nil {
		t.Fatalf("leader's address: %v", err)
	}
	kill(t, ctx, doomed)
	began = time.Now()
	produceRange(t, ctx, producer, "replicated", 100, 200)
	t.Logf("node %d (the leader) killed; 100 more records acknowledged in %v", leader, time.Since(began).Round(time.Millisecond))

	survivors, err := cluster.Brokers(ctx)
	if err != nil {
		t.Fatalf("brokers after the kill: %v", err)
	}
	if len(survivors) != 2 || slices.Contains(survivors, doomedBrokers[0]) {
		t.Fatalf("brokers after killing %v: %v, want the 2 others of %v", doomedBrokers, survivors, brokers)
	}
	newLeader := leaderOf(t, ctx, newClient(t, kgo.SeedBrokers(survivors...)), "replicated")
	if newLeader == leader || newLeader < 1 || newLeader > 3 {
		t.Fatalf("leader after killing node %d: %d, want another node", leader, newLeader)
	}
	t.Logf("leader moved from node %d to node %d", leader, newLeader)

	var got, want []string
	for _, r := range readPartition(t, ctx, survivors, "replicated", 200) {
		got = append(got, fmt.Sprintf("%d:%s", r.Offset, r.Value))
	}
	for i := range 200 {
		want = append(want, fmt.Sprintf("%d:v%d", i, i))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("survivors hold %d records %v, want %v", len(got), got, want)
	}
}

// assertNodeEnv fails unless the node's container was started with these variables.
func assertNodeEnv(t *testing.T, ctx context.Context, node *logbook.LogbookContainer, want map[string]string) {
	t.Helper()
	inspect, err := node.Inspect(ctx)
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	env := map[string]string{}
	for _, kv := range inspect.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s=%q, want %q", k, env[k], v)
		}
	}
}

// TestClusterNeedsANode: a cluster of no node is refused before anything is created.
func TestClusterNeedsANode(t *testing.T) {
	cluster, err := logbook.RunCluster(context.Background(), image(), 0)
	if cluster != nil || err == nil || err.Error() != "run logbook cluster: a cluster needs at least one node, not 0" {
		t.Fatalf("RunCluster(0) = %v, %v; want nil and the refusal", cluster, err)
	}
}
