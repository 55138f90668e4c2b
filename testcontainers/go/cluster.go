package logbook

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
)

// ControllerPort is the metadata quorum's listener (CONTROLLER) on each node of a cluster,
// reached by the other nodes as logbook-<id>:9094 and never mapped to the host.
const ControllerPort = 9094

// LogbookCluster is several Logbook nodes on one Docker network, each a broker and a voter of
// the metadata quorum (KRaft's process.roles=broker,controller), for failover tests: kill a
// node and the partitions it led move to the others.
//
// Each node is a [LogbookContainer] reached from the host on its own mapped port and from the
// network as logbook-<id>:9093.
type LogbookCluster struct {
	network *testcontainers.DockerNetwork
	nodes   []*LogbookContainer
}

// RunCluster starts size nodes of img on a new Docker network and returns once every node
// serves. opts apply to every node after the cluster's own settings (for example
// [WithFaultInjection], or [WithTLS], which keeps the CONTROLLER listener plaintext); they must
// not attach the nodes to another network, which would take the alias the voters use.
//
// Each node gets, as Java's LogbookCluster does: KAFKA_NODE_ID=<id> (1-based), the network
// alias logbook-<id>, KAFKA_PROCESS_ROLES=broker,controller, a third listener
// CONTROLLER://0.0.0.0:9094 (plaintext) named by KAFKA_CONTROLLER_LISTENER_NAMES,
// KAFKA_CONTROLLER_QUORUM_VOTERS=1@logbook-1:9094,..., replication factor min(size, 3) for
// new topics, offsets and transactions, and KAFKA_MIN_INSYNC_REPLICAS one less (at least 1),
// so that acks=all writes survive the loss of one node.
//
// The nodes start concurrently: none logs that it serves before a majority of voters has
// elected a leader, so starting them one by one would wait on the first forever. When one
// fails the others are given up on too. On error the cluster is still returned (with the
// nodes that were created) so that the caller can terminate it, as testcontainers.Run does.
func RunCluster(ctx context.Context, img string, size int, opts ...testcontainers.ContainerCustomizer) (*LogbookCluster, error) {
	if size < 1 {
		return nil, fmt.Errorf("run logbook cluster: a cluster needs at least one node, not %d", size)
	}
	nw, err := network.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("run logbook cluster: network: %w", err)
	}
	cluster := &LogbookCluster{network: nw, nodes: make([]*LogbookContainer, size)}

	voters := make([]string, size)
	for i := range size {
		voters[i] = fmt.Sprintf("%d@%s:%d", i+1, nodeAlias(i+1), ControllerPort)
	}
	replication := min(size, 3)
	env := map[string]string{
		"KAFKA_PROCESS_ROLES":                            "broker,controller",
		"KAFKA_LISTENERS":                                fmt.Sprintf("EXTERNAL://0.0.0.0:9092,BROKER://0.0.0.0:%d,CONTROLLER://0.0.0.0:%d", BrokerPort, ControllerPort),
		protocolMapEnv:                                   "EXTERNAL:PLAINTEXT,BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"KAFKA_CONTROLLER_LISTENER_NAMES":                "CONTROLLER",
		"KAFKA_CONTROLLER_QUORUM_VOTERS":                 strings.Join(voters, ","),
		"KAFKA_DEFAULT_REPLICATION_FACTOR":               strconv.Itoa(replication),
		"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":         strconv.Itoa(replication),
		"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": strconv.Itoa(replication),
		"KAFKA_MIN_INSYNC_REPLICAS":                      strconv.Itoa(max(1, replication-1)),
	}

	// A node that fails cancels the others' start: without it they would wait out their
	// whole startup timeout for a quorum that cannot form.
	startCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, size)
	var wg sync.WaitGroup
	for i := range size {
		id := i + 1
		nodeOpts := make([]testcontainers.ContainerCustomizer, 0, len(opts)+2)
		nodeOpts = append(nodeOpts,
			network.WithNetwork([]string{nodeAlias(id)}, nw),
			testcontainers.WithEnv(env),
			testcontainers.WithEnv(map[string]string{"KAFKA_NODE_ID": strconv.Itoa(id)}),
		)
		nodeOpts = append(nodeOpts, opts...)
		wg.Go(func() {
			node, err := Run(startCtx, img, nodeOpts...)
			cluster.nodes[i] = node
			if err != nil {
				errs[i] = fmt.Errorf("node %d: %w", id, err)
				cancel()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return cluster, fmt.Errorf("run logbook cluster: %w", err)
	}
	return cluster, nil
}

// nodeAlias is node id's name on the cluster's network.
func nodeAlias(id int) string {
	return fmt.Sprintf("logbook-%d", id)
}

// Node is node id (1-based, its KAFKA_NODE_ID, which is what metadata names as a partition's
// leader), or nil when there is no such node or it failed to be created.
func (c *LogbookCluster) Node(id int) *LogbookContainer {
	if id < 1 || id > len(c.nodes) {
		return nil
	}
	return c.nodes[id-1]
}

// Nodes is every node, by id (index 0 is node 1).
func (c *LogbookCluster) Nodes() []*LogbookContainer {
	return append([]*LogbookContainer(nil), c.nodes...)
}

// Network is the Docker network the nodes share, for other containers of a test
// (network.WithNetwork(nil, cluster.Network()) and then [LogbookCluster.NetworkBrokers]).
func (c *LogbookCluster) Network() *testcontainers.DockerNetwork {
	return c.network
}

// Brokers is the bootstrap list for clients on the host: host:<mapped 9092> of every node
// that is running now. It asks Docker each time, so a node killed behind the module's back
// (docker kill) is left out, as Java's getBootstrapServers leaves it out; a node whose state
// cannot be read (removed) counts as not running. It is an error when no node runs.
func (c *LogbookCluster) Brokers(ctx context.Context) ([]string, error) {
	var (
		brokers []string
		errs    []error
	)
	for i, node := range c.nodes {
		if node == nil {
			continue
		}
		state, err := node.State(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", i+1, err))
			continue
		}
		if !state.Running {
			continue
		}
		endpoints, err := node.Brokers(ctx)
		if err != nil {
			return nil, fmt.Errorf("node %d: %w", i+1, err)
		}
		brokers = append(brokers, endpoints...)
	}
	if len(brokers) == 0 {
		return nil, errors.Join(append([]error{errors.New("no node of the cluster is running")}, errs...)...)
	}
	return brokers, nil
}

// NetworkBrokers is the bootstrap list for containers on [LogbookCluster.Network]:
// logbook-<id>:9093 of every node, running or not (a client tries the next one).
func (c *LogbookCluster) NetworkBrokers() []string {
	brokers := make([]string, len(c.nodes))
	for i := range c.nodes {
		brokers[i] = fmt.Sprintf("%s:%d", nodeAlias(i+1), BrokerPort)
	}
	return brokers
}

// Terminate removes every node, then the network (which Docker refuses while a container is
// attached to it). A nil cluster is nothing to terminate, so that
//
//	cluster, err := logbook.RunCluster(ctx, img, 3)
//	t.Cleanup(func() { _ = cluster.Terminate(context.Background()) })
//
// needs no check.
func (c *LogbookCluster) Terminate(ctx context.Context) error {
	if c == nil {
		return nil
	}
	var errs []error
	for i, node := range c.nodes {
		if node == nil {
			continue
		}
		if err := node.Terminate(ctx); err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", i+1, err))
		}
	}
	if c.network != nil {
		if err := c.network.Remove(ctx); err != nil {
			errs = append(errs, fmt.Errorf("network: %w", err))
		}
	}
	return errors.Join(errs...)
}
