package logbook.it.streams;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Creates the word count's input and output topics and writes a known input: LINES lines of WORDS_PER_LINE words
 * drawn (fixed seed) from a vocabulary of VOCABULARY words with a skewed distribution, so some words count into
 * the thousands and some stay small. Writes the expected count of every word to EXPECTED_FILE (word TAB count)
 * and checks that the input topic's end offsets add up to LINES.
 *
 * <p>Usage: InputProducer BOOTSTRAP INPUT OUTPUT PARTITIONS LINES WORDS_PER_LINE VOCABULARY EXPECTED_FILE
 */
public final class InputProducer {
    public static void main(String[] args) throws Exception {
        if (args.length != 8) {
            System.err.println("usage: InputProducer BOOTSTRAP INPUT OUTPUT PARTITIONS LINES WORDS_PER_LINE VOCABULARY EXPECTED_FILE");
            System.exit(2);
        }
        String bootstrap = args[0];
        String input = args[1];
        String output = args[2];
        int partitions = Integer.parseInt(args[3]);
        int lines = Integer.parseInt(args[4]);
        int wordsPerLine = Integer.parseInt(args[5]);
        int vocabulary = Integer.parseInt(args[6]);
        Path expectedFile = Path.of(args[7]);

        Properties adminProps = new Properties();
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(adminProps)) {
            admin.createTopics(List.of(new NewTopic(input, partitions, (short) 1),
                    new NewTopic(output, partitions, (short) 1))).all().get();

            Map<String, Long> expected = new TreeMap<>();
            Random random = new Random(20261130L);
            Properties props = new Properties();
            props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            props.put(ProducerConfig.ACKS_CONFIG, "all");
            props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
            props.put(ProducerConfig.LINGER_MS_CONFIG, 5);
            try (KafkaProducer<String, String> producer =
                    new KafkaProducer<>(props, new StringSerializer(), new StringSerializer())) {
                for (int i = 0; i < lines; i++) {
                    List<String> words = new ArrayList<>(wordsPerLine);
                    for (int j = 0; j < wordsPerLine; j++) {
                        double u = random.nextDouble();
                        String word = String.format("w%04d", (int) (u * u * vocabulary));
                        words.add(word);
                        expected.merge(word, 1L, Long::sum);
                    }
                    producer.send(new ProducerRecord<>(input, String.format("line-%07d", i), String.join(" ", words)));
                }
                producer.flush();
            }

            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                tps.add(new TopicPartition(input, p));
            }
            Map<TopicPartition, OffsetSpec> latest = new TreeMap<>((a, b) -> Integer.compare(a.partition(), b.partition()));
            tps.forEach(tp -> latest.put(tp, OffsetSpec.latest()));
            long end = 0;
            for (var info : admin.listOffsets(latest).all().get().values()) {
                end += info.offset();
            }
            if (end != lines) {
                System.out.println("input topic end offsets add up to " + end + ", expected " + lines);
                System.exit(1);
            }
            writeExpected(expectedFile, expected);
            long total = expected.values().stream().mapToLong(Long::longValue).sum();
            System.out.println("produced " + lines + " lines, " + total + " words, " + expected.size() + " distinct");
        }
    }

    private static void writeExpected(Path file, Map<String, Long> expected) throws IOException {
        try (PrintWriter out = new PrintWriter(Files.newBufferedWriter(file))) {
            expected.forEach((word, count) -> out.println(word + "\t" + count));
        }
    }
}
