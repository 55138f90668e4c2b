package dev.logbook.testcontainers;

import com.github.dockerjava.api.command.InspectContainerResponse;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.wait.strategy.Wait;
import org.testcontainers.images.builder.Transferable;
import org.testcontainers.utility.DockerImageName;

/**
 * The Logbook broker (Kafka's wire protocol) in a container, from the shell-less {@code logbook}
 * image.
 *
 * <p>Clients on the host connect to {@link #getBootstrapServers()}; containers on the same
 * network to {@link #getNetworkBootstrapServers()}. The broker's advertised address is only
 * known once Docker has mapped the port, and the image has no shell to learn it, so the module
 * copies it in as a one-line config file the broker waits for ({@code LOGBOOK_CONFIG_WAIT_MS}),
 * then waits for the broker's {@code Kafka Server started} line.
 *
 * <pre>{@code
 * try (LogbookContainer logbook = new LogbookContainer().withFaultInjection()) {
 *   logbook.start();
 *   props.put("bootstrap.servers", logbook.getBootstrapServers());
 *   logbook.addFault("{\"kind\":\"partition_unavailable\",\"topic\":\"orders\"}");
 * }
 * }</pre>
 */
public class LogbookContainer extends GenericContainer<LogbookContainer> {
  /** The listener for clients on the host (mapped). */
  public static final int KAFKA_PORT = 9092;
  /** The listener for containers on the same Docker network. */
  public static final int BROKER_PORT = 9093;
  /** Metrics, health and the fault injector's HTTP API. */
  public static final int ADMIN_PORT = 9644;

  private static final String ADVERTISED_FILE = "/tmp/logbook-advertised.properties";
  private static final Pattern ID = Pattern.compile("\"id\"\\s*:\\s*(\\d+)");

  private static final String TLS_KEYSTORE = "/tmp/logbook-tls.pem";

  private final Map<String, String> plainUsers = new LinkedHashMap<>();
  private boolean tls;
  private final HttpClient http = HttpClient.newHttpClient();

  /** The image named by the {@code logbook.image} property or {@code LOGBOOK_IMAGE}, else {@code logbook:latest}. */
  public LogbookContainer() {
    this(DockerImageName.parse(defaultImage()));
  }

  /** A container of {@code image}. */
  public LogbookContainer(DockerImageName image) {
    super(image);
    withExposedPorts(KAFKA_PORT, ADMIN_PORT);
    withEnv("KAFKA_LISTENERS", "EXTERNAL://0.0.0.0:" + KAFKA_PORT + ",BROKER://0.0.0.0:" + BROKER_PORT);
    withEnv("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "EXTERNAL:PLAINTEXT,BROKER:PLAINTEXT");
    withEnv("KAFKA_INTER_BROKER_LISTENER_NAME", "BROKER");
    withEnv("KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS", "0");
    withEnv("LOGBOOK_METRICS_LISTEN", "0.0.0.0:" + ADMIN_PORT);
    withEnv("LOGBOOK_CONFIG", ADVERTISED_FILE);
    withEnv("LOGBOOK_CONFIG_WAIT_MS", "60000");
    waitingFor(Wait.forLogMessage(".*Kafka Server started.*", 1));
  }

  private static String defaultImage() {
    String image = System.getProperty("logbook.image");
    if (image == null || image.isBlank()) {
      image = System.getenv("LOGBOOK_IMAGE");
    }
    return image == null || image.isBlank() ? "logbook:latest" : image;
  }

  /** Serves the fault injector ({@link #addFault}); off unless asked for, as on the broker. */
  public LogbookContainer withFaultInjection() {
    return withEnv("LOGBOOK_FAULT_INJECTION", "true");
  }

  /**
   * Makes the host listener SASL_PLAINTEXT with mechanism PLAIN and this user (repeatable).
   * Clients then need {@code security.protocol=SASL_PLAINTEXT}, {@code sasl.mechanism=PLAIN}
   * and a {@code PlainLoginModule} JAAS line; containers on the network keep the plaintext
   * listener.
   */
  public LogbookContainer withSaslPlainUser(String user, String password) {
    plainUsers.put(user, password);
    StringBuilder jaas = new StringBuilder("org.apache.kafka.common.security.plain.PlainLoginModule required");
    plainUsers.forEach((u, p) -> jaas.append(" user_").append(u).append("=\"").append(escape(p)).append('"'));
    jaas.append(';');
    withEnv("KAFKA_SASL_ENABLED_MECHANISMS", "PLAIN");
    withEnv("KAFKA_LISTENER_NAME_EXTERNAL_PLAIN_SASL_JAAS_CONFIG", jaas.toString());
    return withExternalProtocol();
  }

  /**
   * Serves the host listener over TLS with this certificate chain and private key (PEM text; the
   * chain's first certificate must name the host clients connect to, usually {@code localhost}).
   * Clients then need {@code security.protocol=SSL} (or {@code SASL_SSL} with SASL users) and a
   * trust store holding the issuing CA; containers on the network keep the plaintext listener.
   */
  public LogbookContainer withTls(String certificateChainPem, String privateKeyPem) {
    tls = true;
    String pem = privateKeyPem.strip() + "\n" + certificateChainPem.strip() + "\n";
    withCopyToContainer(Transferable.of(pem.getBytes(StandardCharsets.UTF_8), 0644), TLS_KEYSTORE);
    withEnv("KAFKA_LISTENER_NAME_EXTERNAL_SSL_KEYSTORE_TYPE", "PEM");
    withEnv("KAFKA_LISTENER_NAME_EXTERNAL_SSL_KEYSTORE_LOCATION", TLS_KEYSTORE);
    return withExternalProtocol();
  }

  /** The host listener's protocol from what was asked: SASL users, TLS, both or neither. */
  private LogbookContainer withExternalProtocol() {
    String protocol = (plainUsers.isEmpty() ? "" : "SASL_") + (tls ? "SSL" : "PLAINTEXT");
    return withEnv("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "EXTERNAL:" + protocol + ",BROKER:PLAINTEXT");
  }

  private static String escape(String s) {
    return s.replace("\\", "\\\\").replace("\"", "\\\"");
  }

  /** {@code host:port} for clients on the host. */
  public String getBootstrapServers() {
    return getHost() + ":" + getMappedPort(KAFKA_PORT);
  }

  /** {@code alias:9093} for containers on the same network. */
  public String getNetworkBootstrapServers() {
    return networkHost(getContainerInfo()) + ":" + BROKER_PORT;
  }

  /** The fault injector's base URL ({@code POST /faults}, {@code GET /faults}, {@code DELETE /faults}). */
  public String getFaultUrl() {
    return "http://" + getHost() + ":" + getMappedPort(ADMIN_PORT);
  }

  /**
   * The name containers on the network reach the broker by: the last network alias (Testcontainers
   * puts a random {@code tc-…} alias first, the user's after it), else the container's hostname.
   */
  private String networkHost(InspectContainerResponse info) {
    List<String> aliases = getNetworkAliases();
    return aliases.isEmpty() ? info.getConfig().getHostName() : aliases.get(aliases.size() - 1);
  }

  @Override
  protected void containerIsStarting(InspectContainerResponse containerInfo) {
    super.containerIsStarting(containerInfo);
    String host = networkHost(containerInfo);
    String line = "advertised.listeners=EXTERNAL://" + getHost() + ":" + getMappedPort(KAFKA_PORT)
        + ",BROKER://" + host + ":" + BROKER_PORT + "\n";
    copyFileToContainer(Transferable.of(line.getBytes(StandardCharsets.UTF_8), 0644), ADVERTISED_FILE);
  }

  /** Arms a fault from its JSON (README "Fault injection"); its id. */
  public long addFault(String json) {
    String answer = call("POST", "/faults", json);
    Matcher m = ID.matcher(answer);
    if (!m.find()) {
      throw new IllegalStateException("no fault id in " + answer);
    }
    return Long.parseLong(m.group(1));
  }

  /** Every fault and how often it acted, as the broker's JSON list. */
  public String faults() {
    return call("GET", "/faults", null);
  }

  /** Clears every fault. */
  public void clearFaults() {
    call("DELETE", "/faults", null);
  }

  /** Clears one fault. */
  public void clearFault(long id) {
    call("DELETE", "/faults/" + id, null);
  }

  private String call(String method, String path, String body) {
    HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(getFaultUrl() + path))
        .header("content-type", "application/json")
        .method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body));
    try {
      HttpResponse<String> response = http.send(request.build(), HttpResponse.BodyHandlers.ofString());
      if (response.statusCode() != 200) {
        throw new IllegalStateException(method + " " + path + ": HTTP " + response.statusCode() + " " + response.body());
      }
      return response.body();
    } catch (IOException e) {
      throw new IllegalStateException(method + " " + path + ": " + e, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(method + " " + path + ": interrupted", e);
    }
  }
}
