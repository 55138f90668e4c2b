package logbook.it.streams;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Reads the word count's output topic with read_committed until every expected word has reached its expected
 * count and nothing new has been committed for QUIET_SECONDS, then checks what the processing guarantee promises:
 * <ul>
 *   <li>exactly_once_v2: the committed counts of each word, in offset order, are exactly 1, 2, ..., expected
 *       (the cache is off, so each occurrence emits one record): no double counting after the crash, no gap, and
 *       no word that was not in the input;</li>
 *   <li>at_least_once: each word's last committed count is at least the expected one (every occurrence counted
 *       at least once) and no word that was not in the input. After a crash Streams replays the input since the
 *       last commit on top of a state store restored from a changelog that already holds part of that work, so a
 *       count may exceed the expected one and intermediate values may repeat or be skipped: Kafka promises no
 *       more, and the over-count is printed, not checked.</li>
 * </ul>
 * Also prints how many output records read_uncommitted sees beyond read_committed (records of aborted
 * transactions: under exactly_once_v2 the kill should leave some).
 *
 * <p>Usage: CountsVerifier BOOTSTRAP OUTPUT_TOPIC EXPECTED_FILE GUARANTEE TIMEOUT_SECONDS QUIET_SECONDS
 */
public final class CountsVerifier {
    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: CountsVerifier BOOTSTRAP OUTPUT EXPECTED_FILE GUARANTEE TIMEOUT_SECONDS QUIET_SECONDS");
            System.exit(2);
        }
        String bootstrap = args[0];
        String topic = args[1];
        Map<String, Long> expected = new TreeMap<>();
        for (String line : Files.readAllLines(Path.of(args[2]))) {
            String[] parts = line.split("\t");
            expected.put(parts[0], Long.parseLong(parts[1]));
        }
        boolean exactlyOnce = args[3].startsWith("exactly_once");
        long timeoutMs = Long.parseLong(args[4]) * 1000;
        long quietMs = Long.parseLong(args[5]) * 1000;

        Map<String, List<Long>> seen = new HashMap<>();
        long records = 0;
        long start = System.currentTimeMillis();
        long lastNew = start;
        long lastReport = start;
        try (KafkaConsumer<String, Long> consumer = new KafkaConsumer<>(
                Topics.consumerProps(bootstrap, "read_committed"), new StringDeserializer(), new LongDeserializer())) {
            Topics.assignAll(consumer, topic);
            while (true) {
                long now = System.currentTimeMillis();
                var batch = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, Long> r : batch) {
                    seen.computeIfAbsent(r.key(), k -> new ArrayList<>()).add(r.value());
                    records++;
                }
                if (!batch.isEmpty()) {
                    lastNew = now;
                }
                boolean reached = expected.entrySet().stream().allMatch(e -> {
                    List<Long> values = seen.get(e.getKey());
                    return values != null && values.get(values.size() - 1) >= e.getValue();
                });
                if (reached && now - lastNew >= quietMs) {
                    break;
                }
                if (now - start > timeoutMs) {
                    long missing = expected.entrySet().stream().filter(e -> {
                        List<Long> values = seen.get(e.getKey());
                        return values == null || values.get(values.size() - 1) < e.getValue();
                    }).count();
                    System.out.println("FAIL timeout: after " + args[4] + " s, " + missing + " of " + expected.size()
                            + " words below their expected count; " + records + " committed output records read");
                    System.exit(1);
                }
                if (now - lastReport >= 5000) {
                    System.out.println("reading: " + records + " committed output records");
                    lastReport = now;
                }
            }
        }

        List<String> problems = new ArrayList<>();
        for (String word : seen.keySet()) {
            if (!expected.containsKey(word)) {
                problems.add("word " + word + " is not in the input: " + seen.get(word));
            }
        }
        long overCount = 0;
        long expectedTotal = 0;
        for (var e : expected.entrySet()) {
            List<Long> values = seen.get(e.getKey());
            long want = e.getValue();
            expectedTotal += want;
            long last = values.get(values.size() - 1);
            overCount += last - want;
            if (exactlyOnce) {
                for (int i = 0; i < values.size(); i++) {
                    if (values.get(i) != i + 1) {
                        problems.add("word " + e.getKey() + ": committed count #" + (i + 1) + " is " + values.get(i)
                                + " (expected " + (i + 1) + ", final " + want + "); around it: "
                                + values.subList(Math.max(0, i - 3), Math.min(values.size(), i + 4)));
                        break;
                    }
                }
                if (values.size() != want) {
                    problems.add("word " + e.getKey() + ": " + values.size() + " committed counts, expected " + want);
                }
            } else if (last < want) {
                problems.add("word " + e.getKey() + ": final count " + last + " < expected " + want);
            }
        }

        long uncommitted = Topics.readAll(bootstrap, topic, "read_uncommitted", new StringDeserializer(),
                new LongDeserializer(), Duration.ofSeconds(60)).size();
        System.out.println("output: " + records + " committed records for " + expectedTotal + " word occurrences, "
                + expected.size() + " words; over-count " + overCount + "; read_uncommitted sees "
                + (uncommitted - records) + " more (aborted)");
        if (!problems.isEmpty()) {
            System.out.println("FAIL " + problems.size() + " problem(s):");
            problems.stream().limit(20).forEach(p -> System.out.println("  " + p));
            System.exit(1);
        }
        System.out.println("OK");
    }
}
