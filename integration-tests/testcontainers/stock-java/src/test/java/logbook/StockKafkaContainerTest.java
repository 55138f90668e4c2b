package logbook;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.testcontainers.kafka.KafkaContainer;
import org.testcontainers.utility.DockerImageName;

/**
 * Testcontainers' KafkaContainer, written for apache/kafka, on the Logbook image: the one line
 * a user changes is the image name. Proves that the module's start script, environment and
 * readiness wait work unchanged, and that a producer, a consumer group and an admin client
 * get exact offsets and values through the bootstrap address it hands out.
 */
class StockKafkaContainerTest {

    private static final DockerImageName IMAGE = DockerImageName
        .parse(System.getProperty("logbook.image", "logbook:kafka-compat"))
        .asCompatibleSubstituteFor("apache/kafka");

    @Test
    void producesConsumesAndCommitsThroughTheStockModule() throws Exception {
        try (KafkaContainer kafka = new KafkaContainer(IMAGE)) {
            kafka.start();
            String bootstrap = kafka.getBootstrapServers();

            try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
                admin.createTopics(List.of(new NewTopic("orders", 3, (short) 1))).all().get();
                assertEquals(Set.of("orders"), admin.listTopics().names().get());
            }

            Properties producerProps = new Properties();
            producerProps.put("bootstrap.servers", bootstrap);
            producerProps.put("acks", "all");
            producerProps.put("enable.idempotence", "true");
            List<Long> offsets = new ArrayList<>();
            try (KafkaProducer<String, String> producer =
                     new KafkaProducer<>(producerProps, new StringSerializer(), new StringSerializer())) {
                for (int i = 0; i < 10; i++) {
                    RecordMetadata sent = producer.send(new ProducerRecord<>("orders", 0, "k" + i, "v" + i)).get();
                    offsets.add(sent.offset());
                }
            }
            assertEquals(List.of(0L, 1L, 2L, 3L, 4L, 5L, 6L, 7L, 8L, 9L), offsets);

            Properties consumerProps = new Properties();
            consumerProps.put("bootstrap.servers", bootstrap);
            consumerProps.put("group.id", "stock-module");
            consumerProps.put("auto.offset.reset", "earliest");
            consumerProps.put("enable.auto.commit", "false");
            List<String> values = new ArrayList<>();
            try (KafkaConsumer<String, String> consumer =
                     new KafkaConsumer<>(consumerProps, new StringDeserializer(), new StringDeserializer())) {
                consumer.subscribe(List.of("orders"));
                long deadline = System.currentTimeMillis() + 30_000;
                while (values.size() < 10 && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
                        values.add(record.value());
                    }
                }
                consumer.commitSync();
                TopicPartition p0 = new TopicPartition("orders", 0);
                Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(Set.of(p0));
                assertEquals(10L, committed.get(p0).offset());
            }
            assertEquals(List.of("v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9"), values);
        }
    }
}
