package dev.logbook.testcontainers;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;

/** A three-node cluster: a partition's leader killed, nothing acknowledged is lost. */
class LogbookClusterTest {

  private static Properties props(String bootstrap) {
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    p.put("key.serializer", StringSerializer.class.getName());
    p.put("value.serializer", StringSerializer.class.getName());
    p.put("key.deserializer", StringDeserializer.class.getName());
    p.put("value.deserializer", StringDeserializer.class.getName());
    return p;
  }

  private static int leaderOf(String bootstrap, String topic) throws Exception {
    try (Admin admin = Admin.create(props(bootstrap))) {
      return admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS)
          .get(topic).partitions().get(0).leader().id();
    }
  }

  @Test
  void aKilledLeaderLosesNothingAcknowledged() throws Exception {
    try (LogbookCluster cluster = new LogbookCluster(3)) {
      cluster.start();
      String bootstrap = cluster.getBootstrapServers();
      assertEquals(3, bootstrap.split(",").length, bootstrap);
      try (Admin admin = Admin.create(props(bootstrap))) {
        admin.createTopics(List.of(new NewTopic("replicated", 1, (short) 3)
            .configs(Map.of("min.insync.replicas", "2")))).all().get(30, TimeUnit.SECONDS);
      }
      Properties pp = props(bootstrap);
      pp.put("acks", "all");
      pp.put("enable.idempotence", "true");
      pp.put("delivery.timeout.ms", "60000");
      try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
        for (int i = 0; i < 100; i++) {
          assertEquals(i, producer.send(new ProducerRecord<>("replicated", 0, "k", "v" + i)).get().offset());
        }
        int leader = leaderOf(bootstrap, "replicated");
        LogbookContainer doomed = cluster.getNode(leader);
        doomed.getDockerClient().killContainerCmd(doomed.getContainerId()).exec();
        for (int i = 100; i < 200; i++) {
          assertEquals(i, producer.send(new ProducerRecord<>("replicated", 0, "k", "v" + i)).get().offset());
        }
        String survivors = cluster.getNodes().stream()
            .filter(n -> n != doomed)
            .map(LogbookContainer::getBootstrapServers)
            .reduce((a, b) -> a + "," + b).orElseThrow();
        assertNotEquals(leader, leaderOf(survivors, "replicated"));
        List<String> seen = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props(survivors))) {
          TopicPartition tp = new TopicPartition("replicated", 0);
          consumer.assign(List.of(tp));
          consumer.seekToBeginning(List.of(tp));
          long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
          while (seen.size() < 200 && System.nanoTime() < deadline) {
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
              seen.add(r.offset() + ":" + r.value());
            }
          }
        }
        List<String> expected = new ArrayList<>();
        for (int i = 0; i < 200; i++) {
          expected.add(i + ":v" + i);
        }
        assertEquals(expected, seen);
      }
    }
  }
}
