package dev.logbook.testcontainers;

import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.testcontainers.containers.Network;
import org.testcontainers.lifecycle.Startable;
import org.testcontainers.lifecycle.Startables;
import org.testcontainers.utility.DockerImageName;

/**
 * Several Logbook nodes on one Docker network, each a broker and a voter of the metadata quorum
 * (KRaft's {@code process.roles=broker,controller}), with replication factor 3 by default: for
 * failover tests (stop a node, and the partitions it led move).
 *
 * <p>The nodes start together, since none is ready before a majority of voters has elected a
 * leader. Each is a {@link LogbookContainer} reached from the host on its own mapped port, from the
 * network as {@code logbook-<id>:9093}; the voters talk on {@code logbook-<id>:9094}.
 *
 * <pre>{@code
 * try (LogbookCluster cluster = new LogbookCluster(3)) {
 *   cluster.start();
 *   props.put("bootstrap.servers", cluster.getBootstrapServers());
 *   cluster.getNode(1).stop();   // a leader gone for good
 * }
 * }</pre>
 */
public class LogbookCluster implements Startable {
  /** The quorum's listener on each node. */
  public static final int CONTROLLER_PORT = 9094;

  private final Network network;
  private final List<LogbookContainer> nodes;

  /** {@code size} nodes of the default image ({@link LogbookContainer#LogbookContainer()}). */
  public LogbookCluster(int size) {
    this(size, null);
  }

  /** {@code size} nodes of {@code image} (the default image when null). */
  public LogbookCluster(int size, DockerImageName image) {
    if (size < 1) {
      throw new IllegalArgumentException("a cluster needs at least one node");
    }
    this.network = Network.newNetwork();
    String voters = IntStream.rangeClosed(1, size)
        .mapToObj(id -> id + "@" + alias(id) + ":" + CONTROLLER_PORT)
        .collect(Collectors.joining(","));
    int replication = Math.min(size, 3);
    this.nodes = new ArrayList<>();
    for (int id = 1; id <= size; id++) {
      LogbookContainer node = image == null ? new LogbookContainer() : new LogbookContainer(image);
      node.withNetwork(network)
          .withNetworkAliases(alias(id))
          .withEnv("KAFKA_NODE_ID", String.valueOf(id))
          .withEnv("KAFKA_PROCESS_ROLES", "broker,controller")
          .withEnv("KAFKA_LISTENERS", "EXTERNAL://0.0.0.0:" + LogbookContainer.KAFKA_PORT
              + ",BROKER://0.0.0.0:" + LogbookContainer.BROKER_PORT + ",CONTROLLER://0.0.0.0:" + CONTROLLER_PORT)
          .withEnv("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "EXTERNAL:PLAINTEXT,BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT")
          .withEnv("KAFKA_CONTROLLER_LISTENER_NAMES", "CONTROLLER")
          .withEnv("KAFKA_CONTROLLER_QUORUM_VOTERS", voters)
          .withEnv("KAFKA_DEFAULT_REPLICATION_FACTOR", String.valueOf(replication))
          .withEnv("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", String.valueOf(replication))
          .withEnv("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", String.valueOf(replication))
          .withEnv("KAFKA_MIN_INSYNC_REPLICAS", String.valueOf(Math.max(1, replication - 1)));
      nodes.add(node);
    }
  }

  private static String alias(int id) {
    return "logbook-" + id;
  }

  /** Serves the fault injector on every node. */
  public LogbookCluster withFaultInjection() {
    nodes.forEach(LogbookContainer::withFaultInjection);
    return this;
  }

  /** Node {@code id} (1-based, as its {@code node.id}). */
  public LogbookContainer getNode(int id) {
    return nodes.get(id - 1);
  }

  /** Every node, by id. */
  public List<LogbookContainer> getNodes() {
    return List.copyOf(nodes);
  }

  /** The network the nodes share (for other containers of the test). */
  public Network getNetwork() {
    return network;
  }

  /** Every running node's host address, comma-separated, for {@code bootstrap.servers}. */
  public String getBootstrapServers() {
    return nodes.stream()
        .filter(LogbookContainer::isRunning)
        .map(LogbookContainer::getBootstrapServers)
        .collect(Collectors.joining(","));
  }

  /** {@code logbook-<id>:9093,...} for containers on {@link #getNetwork()}. */
  public String getNetworkBootstrapServers() {
    return IntStream.rangeClosed(1, nodes.size())
        .mapToObj(id -> alias(id) + ":" + LogbookContainer.BROKER_PORT)
        .collect(Collectors.joining(","));
  }

  @Override
  public void start() {
    Startables.deepStart(nodes).join();
  }

  @Override
  public void stop() {
    nodes.forEach(LogbookContainer::stop);
    network.close();
  }
}
