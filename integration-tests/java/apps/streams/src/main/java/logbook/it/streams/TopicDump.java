package logbook.it.streams;

import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Writes the values of a whole topic, one per line, as a consumer at the given isolation level sees it up to its
 * end offsets (the last stable offset for read_committed). Used by scripts/connect-test's exactly-once mode to
 * compare what a Connect source task committed with its source file; read_uncommitted shows what aborted
 * transactions left in the log.
 *
 * <p>Usage: TopicDump BOOTSTRAP TOPIC ISOLATION OUT_FILE TIMEOUT_SECONDS
 */
public final class TopicDump {
    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: TopicDump BOOTSTRAP TOPIC ISOLATION OUT_FILE TIMEOUT_SECONDS");
            System.exit(2);
        }
        List<ConsumerRecord<String, String>> records = Topics.readAll(args[0], args[1], args[2],
                new StringDeserializer(), new StringDeserializer(), Duration.ofSeconds(Long.parseLong(args[4])));
        try (PrintWriter out = new PrintWriter(Files.newBufferedWriter(Path.of(args[3]), StandardCharsets.UTF_8))) {
            for (ConsumerRecord<String, String> r : records) {
                out.println(r.value());
            }
        }
        System.out.println(records.size());
    }
}
