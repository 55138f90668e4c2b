package dev.logbook.testcontainers;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.Network;
import org.testcontainers.containers.startupcheck.OneShotStartupCheckStrategy;
import org.testcontainers.utility.DockerImageName;

/** The module against the real image; each test is also an example of its use. */
class LogbookContainerTest {

  private static Properties clientProps(String bootstrap) {
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    p.put("key.serializer", StringSerializer.class.getName());
    p.put("value.serializer", StringSerializer.class.getName());
    p.put("key.deserializer", StringDeserializer.class.getName());
    p.put("value.deserializer", StringDeserializer.class.getName());
    return p;
  }

  private static void createTopic(String bootstrap, String topic, int partitions) throws Exception {
    try (Admin admin = Admin.create(clientProps(bootstrap))) {
      admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get(30, TimeUnit.SECONDS);
    }
  }

  /** Reads {@code count} records of {@code topic} partition 0 from the start: offset and value. */
  private static List<String> readAll(String bootstrap, String topic, int count) {
    Properties p = clientProps(bootstrap);
    List<String> out = new ArrayList<>();
    try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
      TopicPartition tp = new TopicPartition(topic, 0);
      c.assign(List.of(tp));
      c.seekToBeginning(List.of(tp));
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (out.size() < count && System.nanoTime() < deadline) {
        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
          out.add(r.offset() + ":" + r.value());
        }
      }
      // Nothing after them.
      for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
        out.add(r.offset() + ":" + r.value());
      }
    }
    return out;
  }

  @Test
  void producesAndConsumesInAGroupThroughTheMappedPort() throws Exception {
    try (LogbookContainer logbook = new LogbookContainer()) {
      logbook.start();
      String bootstrap = logbook.getBootstrapServers();
      assertTrue(bootstrap.matches(".+:\\d+"), bootstrap);
      createTopic(bootstrap, "orders", 1);
      try (KafkaProducer<String, String> producer = new KafkaProducer<>(clientProps(bootstrap))) {
        for (int i = 0; i < 10; i++) {
          RecordMetadata m = producer.send(new ProducerRecord<>("orders", "k" + i, "v" + i)).get();
          assertEquals(i, m.offset());
        }
      }
      Properties p = clientProps(bootstrap);
      p.put("group.id", "billing");
      p.put("auto.offset.reset", "earliest");
      List<String> seen = new ArrayList<>();
      try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
        consumer.subscribe(List.of("orders"));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (seen.size() < 10 && System.nanoTime() < deadline) {
          for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
            seen.add(r.offset() + ":" + r.value());
          }
        }
        consumer.commitSync();
        assertEquals(10L, consumer.committed(java.util.Set.of(new TopicPartition("orders", 0)))
            .get(new TopicPartition("orders", 0)).offset());
      }
      List<String> expected = new ArrayList<>();
      for (int i = 0; i < 10; i++) {
        expected.add(i + ":v" + i);
      }
      assertEquals(expected, seen);
    }
  }

  /**
   * The example the module is for: a consume-transform-produce service (upper-cases {@code in}
   * into {@code out}, committing its input offsets after each output is acknowledged) loses
   * nothing and duplicates nothing when the output partition's leader goes away for 2 s and when
   * its produces are refused with NOT_LEADER_OR_FOLLOWER.
   */
  @Test
  void noMessageLostWhenTheLeaderMoves() throws Exception {
    try (LogbookContainer logbook = new LogbookContainer().withFaultInjection()) {
      logbook.start();
      String bootstrap = logbook.getBootstrapServers();
      createTopic(bootstrap, "in", 1);
      createTopic(bootstrap, "out", 1);
      int total = 200;
      try (KafkaProducer<String, String> producer = new KafkaProducer<>(clientProps(bootstrap))) {
        for (int i = 0; i < total; i++) {
          producer.send(new ProducerRecord<>("in", "k" + i, "order-" + i));
        }
        producer.flush();
      }
      AtomicInteger processed = new AtomicInteger();
      AtomicBoolean stop = new AtomicBoolean();
      Thread service = new Thread(() -> uppercaseService(bootstrap, processed, stop));
      service.start();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (processed.get() < 50 && System.nanoTime() < deadline) {
        Thread.sleep(10);
      }
      long gone = logbook.addFault("{\"kind\":\"partition_unavailable\",\"topic\":\"out\",\"duration_ms\":2000}");
      Thread.sleep(2500);
      long refused = logbook.addFault(
          "{\"kind\":\"error\",\"api\":\"Produce\",\"topic\":\"out\",\"error\":\"NOT_LEADER_OR_FOLLOWER\",\"count\":3}");
      while (processed.get() < total && System.nanoTime() < deadline + TimeUnit.SECONDS.toNanos(30)) {
        Thread.sleep(10);
      }
      stop.set(true);
      service.join();
      String faults = logbook.faults();
      assertTrue(faults.matches("(?s).*\"id\":" + refused + ",\"injected\":3,.*"), faults);
      assertTrue(faults.matches("(?s).*\"id\":" + gone + ",\"injected\":[1-9].*"), faults);
      List<String> expected = new ArrayList<>();
      for (int i = 0; i < total; i++) {
        expected.add(i + ":ORDER-" + i);
      }
      assertEquals(expected, readAll(bootstrap, "out", total));
    }
  }

  private static void uppercaseService(String bootstrap, AtomicInteger processed, AtomicBoolean stop) {
    Properties cp = clientProps(bootstrap);
    cp.put("group.id", "uppercase");
    cp.put("auto.offset.reset", "earliest");
    cp.put("enable.auto.commit", "false");
    Properties pp = clientProps(bootstrap);
    pp.put("enable.idempotence", "true");
    pp.put("acks", "all");
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp);
        KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
      consumer.subscribe(List.of("in"));
      while (!stop.get()) {
        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
          try {
            producer.send(new ProducerRecord<>("out", r.key(), r.value().toUpperCase())).get();
          } catch (InterruptedException | ExecutionException e) {
            throw new IllegalStateException("output not acknowledged", e);
          }
          consumer.commitSync(Map.of(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1)));
          processed.incrementAndGet();
        }
      }
    }
  }

  @Test
  void saslPlainUsersLogInAndOthersAreRefused() throws Exception {
    try (LogbookContainer logbook = new LogbookContainer().withSaslPlainUser("alice", "alice-secret")) {
      logbook.start();
      Properties p = clientProps(logbook.getBootstrapServers());
      p.put("security.protocol", "SASL_PLAINTEXT");
      p.put("sasl.mechanism", "PLAIN");
      p.put("sasl.jaas.config",
          "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"alice\" password=\"alice-secret\";");
      try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
        assertEquals(0L, producer.send(new ProducerRecord<>("secured", "k", "v")).get(30, TimeUnit.SECONDS).offset());
      }
      p.put("sasl.jaas.config",
          "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"alice\" password=\"wrong\";");
      p.put("max.block.ms", "10000");
      try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
        ExecutionException e = assertThrows(ExecutionException.class,
            () -> producer.send(new ProducerRecord<>("secured", "k", "v")).get(30, TimeUnit.SECONDS));
        assertTrue(e.getCause() instanceof SaslAuthenticationException, String.valueOf(e.getCause()));
      }
    }
  }

  /** Runs openssl in {@code dir}; fails the test if it fails. */
  private static void openssl(java.nio.file.Path dir, String... args) throws Exception {
    List<String> command = new ArrayList<>(List.of("openssl"));
    command.addAll(List.of(args));
    Process p = new ProcessBuilder(command).directory(dir.toFile()).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
    assertEquals(0, p.waitFor(), String.join(" ", command) + ": " + out);
  }

  @Test
  void tlsWithSaslServesTheHostListenerAndRefusesAnUntrustedClient() throws Exception {
    java.nio.file.Path dir = java.nio.file.Files.createTempDirectory("logbook-tls");
    openssl(dir, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test-ca",
        "-keyout", "ca.key", "-out", "ca.pem");
    openssl(dir, "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "server.key",
        "-out", "server.csr");
    java.nio.file.Files.writeString(dir.resolve("san.ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n");
    openssl(dir, "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-days", "2", "-extfile", "san.ext", "-out", "server.pem");
    String chain = java.nio.file.Files.readString(dir.resolve("server.pem"));
    String key = java.nio.file.Files.readString(dir.resolve("server.key"));
    String ca = java.nio.file.Files.readString(dir.resolve("ca.pem"));
    try (LogbookContainer logbook = new LogbookContainer()
        .withTls(chain, key)
        .withSaslPlainUser("alice", "alice-secret")) {
      logbook.start();
      Properties p = clientProps(logbook.getBootstrapServers().replace(logbook.getHost(), "localhost"));
      p.put("security.protocol", "SASL_SSL");
      p.put("sasl.mechanism", "PLAIN");
      p.put("sasl.jaas.config",
          "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"alice\" password=\"alice-secret\";");
      p.put("ssl.truststore.type", "PEM");
      p.put("ssl.truststore.certificates", ca);
      try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
        assertEquals(0L, producer.send(new ProducerRecord<>("private", "k", "v")).get(30, TimeUnit.SECONDS).offset());
      }
      // A client that does not trust the CA is refused at the handshake.
      openssl(dir, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=other-ca",
          "-keyout", "other.key", "-out", "other.pem");
      p.put("ssl.truststore.certificates", java.nio.file.Files.readString(dir.resolve("other.pem")));
      p.put("max.block.ms", "10000");
      try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
        Exception e = assertThrows(Exception.class,
            () -> producer.send(new ProducerRecord<>("private", "k", "v")).get(30, TimeUnit.SECONDS));
        Throwable cause = e instanceof ExecutionException ? e.getCause() : e;
        assertTrue(cause instanceof org.apache.kafka.common.errors.SslAuthenticationException, String.valueOf(cause));
      }
    }
  }

  @Test
  void containersOnTheNetworkUseTheBrokerListener() throws Exception {
    try (Network network = Network.newNetwork();
        LogbookContainer logbook = new LogbookContainer().withNetwork(network).withNetworkAliases("logbook")) {
      logbook.start();
      assertEquals("logbook:9093", logbook.getNetworkBootstrapServers());
      // The image's own CLI in a second container, over the network listener.
      DockerImageName image = DockerImageName.parse(logbook.getDockerImageName());
      try (GenericContainer<?> tool = new GenericContainer<>(image)
          .withNetwork(network)
          .withCommand("topic", "create", "from-the-network", "--partitions", "3", "-b", logbook.getNetworkBootstrapServers())
          .withStartupCheckStrategy(new OneShotStartupCheckStrategy().withTimeout(Duration.ofSeconds(30)))) {
        tool.start();
      }
      try (Admin admin = Admin.create(clientProps(logbook.getBootstrapServers()))) {
        int partitions = admin.describeTopics(List.of("from-the-network")).allTopicNames().get(30, TimeUnit.SECONDS)
            .get("from-the-network").partitions().size();
        assertEquals(3, partitions);
      }
    }
  }
}
