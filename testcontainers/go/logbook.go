// Package logbook is a Testcontainers module for Logbook, a broker that speaks Kafka's wire
// protocol, started from the shell-less `logbook` image (the default target of the repo's
// Dockerfile).
//
// Clients on the host use [LogbookContainer.Brokers]; containers on the same Docker network
// use [LogbookContainer.NetworkBrokers]. With [WithFaultInjection] the broker's fault
// injector (README "Fault injection") is driven by [LogbookContainer.AddFault],
// [LogbookContainer.Faults] and [LogbookContainer.ClearFaults]. [WithSASLPlainUser] and
// [WithTLS] secure the host listener; [RunCluster] starts several nodes that replicate.
//
//	ctr, err := logbook.Run(ctx, "logbook:latest", logbook.WithFaultInjection())
//	defer testcontainers.TerminateContainer(ctr)
//	brokers, err := ctr.Brokers(ctx)
//	id, err := ctr.AddFault(ctx, map[string]any{"kind": "partition_unavailable", "topic": "orders"})
//
// How the broker is started is the same in every language (testcontainers/README.md): the
// image has no shell, so nothing inside the container can learn the port Docker mapped on the
// host. The broker is told to wait (binding nothing) for a one-line config file, and the
// module copies that file in once the container runs and its port is mapped.
package logbook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

const (
	// KafkaPort is the listener for clients on the host (EXTERNAL), mapped by Docker.
	KafkaPort = "9092/tcp"
	// BrokerPort is the listener for containers on the same Docker network (BROKER), not
	// mapped: it is reached by network alias or container hostname.
	BrokerPort = 9093
	// AdminPort serves metrics, health and the fault injector's HTTP API.
	AdminPort = "9644/tcp"

	// advertisedFile is where the broker waits for its advertised.listeners line
	// (LOGBOOK_CONFIG, LOGBOOK_CONFIG_WAIT_MS).
	advertisedFile = "/tmp/logbook-advertised.properties"
	// startedLog is the line the broker prints once it serves, the same one Kafka prints.
	startedLog = "Kafka Server started"
	// jaasEnv holds the PLAIN users of the EXTERNAL listener, as Kafka names it.
	jaasEnv    = "KAFKA_LISTENER_NAME_EXTERNAL_PLAIN_SASL_JAAS_CONFIG"
	jaasPrefix = "org.apache.kafka.common.security.plain.PlainLoginModule required"
	// protocolMapEnv maps each listener to its security protocol.
	protocolMapEnv = "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"
	// tlsKeystore is where WithTLS puts the key and chain, one PEM file; tlsKeystoreEnv names
	// it for the EXTERNAL listener only.
	tlsKeystore    = "/tmp/logbook-tls.pem"
	tlsKeystoreEnv = "KAFKA_LISTENER_NAME_EXTERNAL_SSL_KEYSTORE_LOCATION"
)

// startupTimeout bounds the wait for the mapped port and for startedLog. The broker itself
// gives up after LOGBOOK_CONFIG_WAIT_MS (60 s) without the file, so waiting longer than that
// for the log line would only hide the cause.
var startupTimeout = 90 * time.Second

// LogbookContainer is a running Logbook broker.
type LogbookContainer struct {
	testcontainers.Container
	networkHost string
	http        *http.Client
}

// startState carries what the request knows (the network alias) to the PostStarts hook, and
// what the hook learns (the host name other containers use) back to Run.
type startState struct {
	alias       string
	networkHost string
}

// Run starts a Logbook container from img (for example "logbook:latest") and returns once
// the broker serves.
//
// The module's own PostStarts hook is added after every option, so a caller's
// WithLifecycleHooks cannot drop it, and it does the log wait itself: testcontainers-go runs a
// request's wait strategy (WaitingFor) only after the PostStarts hooks, and the broker prints
// nothing before the file is copied in. A caller's WithWaitStrategy therefore adds to the
// module's wait instead of replacing it.
func Run(ctx context.Context, img string, opts ...testcontainers.ContainerCustomizer) (*LogbookContainer, error) {
	state := &startState{}
	moduleOpts := make([]testcontainers.ContainerCustomizer, 0, len(opts)+3)
	moduleOpts = append(moduleOpts,
		testcontainers.WithExposedPorts(KafkaPort, AdminPort),
		testcontainers.WithEnv(map[string]string{
			"KAFKA_LISTENERS":                        fmt.Sprintf("EXTERNAL://0.0.0.0:9092,BROKER://0.0.0.0:%d", BrokerPort),
			protocolMapEnv:                           "EXTERNAL:PLAINTEXT,BROKER:PLAINTEXT",
			"KAFKA_INTER_BROKER_LISTENER_NAME":       "BROKER",
			"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
			"LOGBOOK_METRICS_LISTEN":                 "0.0.0.0:9644",
			"LOGBOOK_CONFIG":                         advertisedFile,
			"LOGBOOK_CONFIG_WAIT_MS":                 "60000",
		}),
	)
	moduleOpts = append(moduleOpts, opts...)
	moduleOpts = append(moduleOpts, advertiseOnStart(state))

	var c *LogbookContainer
	ctr, err := testcontainers.Run(ctx, img, moduleOpts...)
	if ctr != nil {
		c = &LogbookContainer{Container: ctr, networkHost: state.networkHost, http: &http.Client{Timeout: 60 * time.Second}}
	}
	if err != nil {
		return c, fmt.Errorf("run logbook: %w", err)
	}
	return c, nil
}

// WithFaultInjection serves the fault injector on the admin port (LOGBOOK_FAULT_INJECTION).
// It is off unless asked for, as on the broker: without it /faults answers 404 and nothing on
// the request path changes.
func WithFaultInjection() testcontainers.CustomizeRequestOption {
	return testcontainers.WithEnv(map[string]string{"LOGBOOK_FAULT_INJECTION": "true"})
}

// WithSASLPlainUser makes the host listener SASL_PLAINTEXT (SASL_SSL with [WithTLS]) with
// mechanism PLAIN and adds this user (the option can be repeated for more users). Clients on
// the host then need SASL/PLAIN (franz-go: kgo.SASL(plain.Auth{User: user, Pass:
// password}.AsMechanism())); containers on the network keep the plaintext BROKER listener,
// which the broker also uses for itself.
func WithSASLPlainUser(user, password string) testcontainers.CustomizeRequestOption {
	return func(req *testcontainers.GenericContainerRequest) error {
		if req.Env == nil {
			req.Env = map[string]string{}
		}
		jaas := strings.TrimSuffix(req.Env[jaasEnv], ";")
		if jaas == "" {
			jaas = jaasPrefix
		}
		jaas += fmt.Sprintf(" user_%s=\"%s\";", user, jaasEscape(password))
		req.Env[jaasEnv] = jaas
		req.Env["KAFKA_SASL_ENABLED_MECHANISMS"] = "PLAIN"
		setExternalProtocol(req)
		return nil
	}
}

// WithTLS serves the host listener over TLS (SSL, or SASL_SSL with [WithSASLPlainUser]) with
// this certificate chain and unencrypted private key, both PEM text. The chain's first
// certificate must name the host clients connect to (what [LogbookContainer.Brokers] returns,
// usually localhost). Clients on the host then need TLS and a pool holding the issuing CA
// (franz-go: kgo.DialTLSConfig(&tls.Config{RootCAs: pool})); containers on the network keep
// the plaintext BROKER listener, as with SASL.
//
// Key and chain go into one PEM keystore (KAFKA_LISTENER_NAME_EXTERNAL_SSL_KEYSTORE_TYPE=PEM),
// copied in after the container is created and before it starts, so it is in place before the
// advertised-listener file that makes the broker read its settings and bind.
func WithTLS(certChainPEM, privateKeyPEM string) testcontainers.CustomizeRequestOption {
	pem := []byte(strings.TrimSpace(privateKeyPEM) + "\n" + strings.TrimSpace(certChainPEM) + "\n")
	return func(req *testcontainers.GenericContainerRequest) error {
		if req.Env == nil {
			req.Env = map[string]string{}
		}
		req.Env["KAFKA_LISTENER_NAME_EXTERNAL_SSL_KEYSTORE_TYPE"] = "PEM"
		req.Env[tlsKeystoreEnv] = tlsKeystore
		// A reader per request: RunCluster applies the same option to every node, concurrently.
		req.Files = append(req.Files, testcontainers.ContainerFile{
			Reader:            bytes.NewReader(pem),
			ContainerFilePath: tlsKeystore,
			FileMode:          0o644,
		})
		setExternalProtocol(req)
		return nil
	}
}

// setExternalProtocol sets the EXTERNAL listener's protocol from what the options asked for
// so far (SASL users, TLS, both or neither), so WithTLS and WithSASLPlainUser compose in any
// order. It rewrites only the EXTERNAL entry of the map, keeping the others (BROKER, and
// CONTROLLER on a cluster's nodes).
func setExternalProtocol(req *testcontainers.GenericContainerRequest) {
	protocol := "PLAINTEXT"
	if req.Env[tlsKeystoreEnv] != "" {
		protocol = "SSL"
	}
	if req.Env[jaasEnv] != "" {
		protocol = "SASL_" + protocol
	}
	current := req.Env[protocolMapEnv]
	if current == "" {
		current = "EXTERNAL:PLAINTEXT,BROKER:PLAINTEXT"
	}
	entries := strings.Split(current, ",")
	found := false
	for i, entry := range entries {
		if strings.HasPrefix(entry, "EXTERNAL:") {
			entries[i] = "EXTERNAL:" + protocol
			found = true
		}
	}
	if !found {
		entries = append([]string{"EXTERNAL:" + protocol}, entries...)
	}
	req.Env[protocolMapEnv] = strings.Join(entries, ",")
}

// jaasEscape quotes a value for a JAAS line, as Kafka's parser reads it.
func jaasEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}

// advertiseOnStart records the network alias the options gave (so it must run after them)
// and adds the hook that tells the broker its addresses and waits for it.
func advertiseOnStart(state *startState) testcontainers.CustomizeRequestOption {
	return func(req *testcontainers.GenericContainerRequest) error {
		if len(req.Networks) > 0 {
			if aliases := req.NetworkAliases[req.Networks[0]]; len(aliases) > 0 {
				state.alias = aliases[0]
			}
		}
		req.LifecycleHooks = append(req.LifecycleHooks, testcontainers.ContainerLifecycleHooks{
			PostStarts: []testcontainers.ContainerHook{
				// One hook copies the file and then waits, so the wait never runs (for
				// its whole timeout) when the copy failed.
				func(ctx context.Context, c testcontainers.Container) error {
					if err := advertise(ctx, c, state); err != nil {
						return fmt.Errorf("advertise listeners: %w", err)
					}
					return wait.ForLog(startedLog).WithStartupTimeout(startupTimeout).WaitUntilReady(ctx, c)
				},
			},
		})
		return nil
	}
}

// advertise copies in the one-line file the broker waits for:
// advertised.listeners=EXTERNAL://<host>:<mapped 9092>,BROKER://<alias or hostname>:9093.
func advertise(ctx context.Context, c testcontainers.Container, state *startState) error {
	external, err := mappedEndpoint(ctx, c, KafkaPort)
	if err != nil {
		return err
	}
	networkHost := state.alias
	if networkHost == "" {
		// Without an alias, other containers on the network (a user-defined one resolves
		// container names and hostnames) reach it by its hostname, as Testcontainers' Kafka
		// module advertises it.
		inspect, err := c.Inspect(ctx)
		if err != nil {
			return fmt.Errorf("inspect: %w", err)
		}
		networkHost = inspect.Config.Hostname
	}
	state.networkHost = networkHost
	line := fmt.Sprintf("advertised.listeners=EXTERNAL://%s,BROKER://%s:%d\n", external, networkHost, BrokerPort)
	if err := c.CopyToContainer(ctx, []byte(line), advertisedFile, 0o644); err != nil {
		return fmt.Errorf("copy %s: %w", advertisedFile, err)
	}
	return nil
}

// mappedEndpoint is host:port of a mapped port. Docker can report a started container before
// its port bindings, so it asks again for a while.
func mappedEndpoint(ctx context.Context, c testcontainers.Container, port string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	for {
		endpoint, err := c.PortEndpoint(ctx, port, "")
		if err == nil {
			return endpoint, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("mapped port %s: %w", port, errors.Join(err, ctx.Err()))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Brokers is the bootstrap list for clients on the host: host:<mapped 9092>, the address the
// broker advertises on its EXTERNAL listener.
func (c *LogbookContainer) Brokers(ctx context.Context) ([]string, error) {
	endpoint, err := c.PortEndpoint(ctx, KafkaPort, "")
	if err != nil {
		return nil, err
	}
	return []string{endpoint}, nil
}

// NetworkBrokers is the bootstrap list for containers on the same Docker network:
// "<first network alias, else the container's hostname>:9093", what the BROKER listener
// advertises. It needs no Docker call: the name was fixed when the broker was started.
func (c *LogbookContainer) NetworkBrokers() []string {
	return []string{fmt.Sprintf("%s:%d", c.networkHost, BrokerPort)}
}

// FaultURL is the fault injector's base URL, http://host:<mapped 9644>: POST /faults arms a
// fault, GET /faults lists them, DELETE /faults[/<id>] clears them.
func (c *LogbookContainer) FaultURL(ctx context.Context) (string, error) {
	endpoint, err := c.PortEndpoint(ctx, AdminPort, "http")
	if err != nil {
		return "", err
	}
	return endpoint, nil
}

// AddFault arms a fault from its fields (README "Fault injection"), for example
// {"kind": "error", "api": "Produce", "topic": "orders", "error": "NOT_LEADER_OR_FOLLOWER",
// "count": 3}, and returns its id. The broker refuses an invalid spec with its reason, which
// is returned as the error.
func (c *LogbookContainer) AddFault(ctx context.Context, fault map[string]any) (int64, error) {
	body, err := json.Marshal(fault)
	if err != nil {
		return 0, fmt.Errorf("fault: %w", err)
	}
	var view struct {
		ID *int64 `json:"id"`
	}
	if err := c.call(ctx, http.MethodPost, "/faults", body, &view); err != nil {
		return 0, err
	}
	if view.ID == nil {
		return 0, errors.New("POST /faults: no id in the answer")
	}
	return *view.ID, nil
}

// Faults lists every fault, spent and expired ones included, as the broker's JSON objects:
// the spec's fields plus "id", "injected" (how often it acted) and "armed". Numbers decode as
// float64, as encoding/json does for any.
func (c *LogbookContainer) Faults(ctx context.Context) ([]map[string]any, error) {
	var faults []map[string]any
	if err := c.call(ctx, http.MethodGet, "/faults", nil, &faults); err != nil {
		return nil, err
	}
	return faults, nil
}

// ClearFaults clears every fault.
func (c *LogbookContainer) ClearFaults(ctx context.Context) error {
	return c.call(ctx, http.MethodDelete, "/faults", nil, nil)
}

// ClearFault clears the fault with this id.
func (c *LogbookContainer) ClearFault(ctx context.Context, id int64) error {
	return c.call(ctx, http.MethodDelete, fmt.Sprintf("/faults/%d", id), nil, nil)
}

// call sends one request to the fault API and decodes its JSON answer into out (unless nil).
func (c *LogbookContainer) call(ctx context.Context, method, path string, body []byte, out any) error {
	base, err := c.FaultURL(ctx)
	if err != nil {
		return fmt.Errorf("fault url: %w", err)
	}
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, reader)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	client := c.http
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, strings.TrimSpace(string(answer)))
	}
	if out != nil {
		if err := json.Unmarshal(answer, out); err != nil {
			return fmt.Errorf("%s %s: %w (%s)", method, path, err, answer)
		}
	}
	return nil
}
