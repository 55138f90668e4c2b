package logbook.it.streams;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Deserializer;

/** Reading whole topics with a plain consumer at a chosen isolation level, shared by the checkers. */
final class Topics {
    private Topics() {}

    static Properties consumerProps(String bootstrap, String isolation) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        return props;
    }

    static <K, V> List<TopicPartition> assignAll(KafkaConsumer<K, V> consumer, String topic) {
        List<TopicPartition> tps = new ArrayList<>();
        for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
            tps.add(new TopicPartition(topic, info.partition()));
        }
        tps.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
        consumer.assign(tps);
        consumer.seekToBeginning(tps);
        return tps;
    }

    /**
     * Every record of the topic up to the consumer's end offsets (the last stable offset for read_committed, the
     * high watermark for read_uncommitted), in partition order; fails after the timeout.
     */
    static <K, V> List<ConsumerRecord<K, V>> readAll(String bootstrap, String topic, String isolation,
            Deserializer<K> keys, Deserializer<V> values, Duration timeout) {
        try (KafkaConsumer<K, V> consumer = new KafkaConsumer<>(consumerProps(bootstrap, isolation), keys, values)) {
            List<TopicPartition> tps = assignAll(consumer, topic);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps);
            List<ConsumerRecord<K, V>> out = new ArrayList<>();
            long deadline = System.nanoTime() + timeout.toNanos();
            while (!caughtUp(consumer, end)) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("reading " + topic + " (" + isolation + ") did not reach end offsets "
                            + end + " within " + timeout);
                }
                for (ConsumerRecord<K, V> r : consumer.poll(Duration.ofMillis(200))) {
                    out.add(r);
                }
            }
            out.sort((a, b) -> a.partition() != b.partition()
                    ? Integer.compare(a.partition(), b.partition()) : Long.compare(a.offset(), b.offset()));
            return out;
        }
    }

    static <K, V> boolean caughtUp(KafkaConsumer<K, V> consumer, Map<TopicPartition, Long> end) {
        for (var e : end.entrySet()) {
            if (consumer.position(e.getKey()) < e.getValue()) {
                return false;
            }
        }
        return true;
    }
}
