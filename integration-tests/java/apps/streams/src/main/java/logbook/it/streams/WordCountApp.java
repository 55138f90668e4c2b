package logbook.it.streams;

import java.time.Duration;
import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * The Kafka Streams application of scripts/streams-test: a word count whose topology has the parts that need a
 * broker's help: a repartition topic (groupBy word, purged by Streams with DeleteRecords after each commit), a
 * persistent state store with a compacted changelog topic (restored after a crash), and, with exactly_once_v2,
 * one transaction per commit covering output, changelog, repartition records and input offsets.
 *
 * <p>The record cache is off, so every word occurrence emits one output record carrying the word's new count:
 * under exactly-once the committed output of a word is exactly 1, 2, ..., n.
 *
 * <p>Prints to stdout, for the script: {@code state OLD -> NEW} on each state change and {@code progress N}
 * every {@code PROGRESS_EVERY} counted occurrences (uncommitted work included, so the script can kill it
 * mid-transaction), and {@code closed true in state NOT_RUNNING ...} after SIGTERM (graceful close; the JVM
 * then exits 143). Exits 1 if Streams stopped with an error.
 *
 * <p>Usage: WordCountApp BOOTSTRAP GUARANTEE STATE_DIR APPLICATION_ID INPUT_TOPIC OUTPUT_TOPIC
 */
public final class WordCountApp {
    static final long PROGRESS_EVERY = 2000;

    public static void main(String[] args) throws InterruptedException {
        if (args.length != 6) {
            System.err.println("usage: WordCountApp BOOTSTRAP GUARANTEE STATE_DIR APPLICATION_ID INPUT OUTPUT");
            System.exit(2);
        }
        String bootstrap = args[0];
        String guarantee = args[1];
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[3]);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[2]);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        // at_least_once commits every 30 s by default: 1 s keeps the replay after the kill short. exactly_once_v2
        // keeps its default (100 ms), as applications run it.
        if (guarantee.equals(StreamsConfig.AT_LEAST_ONCE)) {
            props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 1000);
        }
        // The killed member stays in the group until its session expires; the restarted one waits for that.
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1500);

        StreamsBuilder builder = new StreamsBuilder();
        AtomicLong counted = new AtomicLong();
        builder.stream(args[4], Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.split(" ")))
                .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
                .count(Materialized.as("word-counts"))
                .toStream()
                .peek((word, count) -> {
                    long n = counted.incrementAndGet();
                    if (n % PROGRESS_EVERY == 0) {
                        System.out.println("progress " + n + " " + System.currentTimeMillis());
                    }
                })
                .to(args[5], Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((newState, oldState) -> {
            System.out.println("state " + oldState + " -> " + newState);
            if (newState == KafkaStreams.State.ERROR || newState == KafkaStreams.State.NOT_RUNNING) {
                stopped.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("uncaught " + e);
            e.printStackTrace(System.out);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Thread closer = new Thread(() -> {
            boolean closed = streams.close(Duration.ofSeconds(30));
            System.out.println("closed " + closed + " in state " + streams.state() + " after " + counted.get()
                    + " counted occurrences");
            System.out.flush();
            stopped.countDown();
        });
        Runtime.getRuntime().addShutdownHook(closer);
        streams.start();
        stopped.await();
        boolean failed = streams.state() == KafkaStreams.State.ERROR;
        System.out.println("stopped in state " + streams.state() + " after " + counted.get() + " counted occurrences");
        System.out.flush();
        if (failed) {
            Runtime.getRuntime().halt(1);
        }
    }
}
