package logbook.it.streams;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Probes a broker's transactions with the Java client (kafka-clients 4.1, which uses transaction protocol v2 when
 * the broker finalizes the feature transaction.version at 2, else v1): what Kafka's own client sees, not what a
 * test harness assumes. One line per check, {@code PASS name detail} or {@code FAIL name detail}, {@code INFO} lines
 * for facts, then {@code txn-probe: N passed, N failed}; exits 1 on a failure.
 *
 * <p>Checks (topics and transactional ids carry a per-run suffix, so a long-running reference broker can be reused):
 * <ol>
 *   <li>commit-abort: 10 records committed and 7 aborted over 2 partitions; read_committed sees exactly the 10 (at
 *       offsets 0..4 of each partition), read_uncommitted all 17, each transaction end takes one offset (marker);</li>
 *   <li>open-transaction-lso: while a transaction is open, read_committed end offset (last stable offset) stays at
 *       its first record while read_uncommitted's (high watermark) moves; after commit both are equal;</li>
 *   <li>send-offsets: consume-transform-produce with a subscribed group; sendOffsetsToTransaction then commit makes
 *       the output and the group's offsets visible together (before the commit OffsetFetch shows none, and a
 *       read_committed consumer's committed(), which asks with require_stable, times out on UNSTABLE_OFFSET_COMMIT); an aborted round changes neither;</li>
 *   <li>fencing: a second producer with the same transactional.id aborts the first one's open transaction and the
 *       first one's commit fails with ProducerFencedException;</li>
 *   <li>timeout: a transaction left open longer than its transaction.timeout.ms is aborted by the coordinator, the
 *       last stable offset moves on (a later non-transactional record becomes readable), and the late commit
 *       fails as Kafka's does (ProducerFencedException with protocol v1, InvalidTxnStateException with v2).</li>
 * </ol>
 * Which protocol the client used is checked on the wire: after commit-abort's two transactions,
 * DescribeTransactions reports producer epoch 2 with protocol v2 (every EndTxn bumps it) and 0 with v1. With the
 * environment variable TXN_VERSION=N the probe also fails unless the broker finalizes transaction.version N.
 * Usage: TxnProbe BOOTSTRAP [check-name ...]
 */
public final class TxnProbe {
    private final String bootstrap;
    private final String suffix = Long.toString(System.currentTimeMillis() % 100_000_000L);
    private final Admin admin;
    /** The finalized transaction.version, 0 when the broker finalizes none: it decides the client's protocol. */
    private short transactionVersion;
    /** TXN_VERSION: the transaction.version the broker must finalize, or null for whatever it finalizes. */
    private final String expectedVersion = System.getenv("TXN_VERSION");
    private int passed;
    private int failed;

    private TxnProbe(String bootstrap) {
        this.bootstrap = bootstrap;
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        this.admin = Admin.create(props);
    }

    public static void main(String[] args) {
        if (args.length < 1) {
            System.err.println("usage: TxnProbe BOOTSTRAP [check-name ...]");
            System.exit(2);
        }
        TxnProbe probe = new TxnProbe(args[0]);
        List<String> only = List.of(args).subList(1, args.length);
        probe.features();
        probe.run(only, "commit-abort", probe::commitAbort);
        probe.run(only, "open-transaction-lso", probe::openTransactionLso);
        probe.run(only, "send-offsets", probe::sendOffsets);
        probe.run(only, "fencing", probe::fencing);
        probe.run(only, "timeout", probe::timeout);
        probe.admin.close(Duration.ofSeconds(5));
        System.out.println("txn-probe: " + probe.passed + " passed, " + probe.failed + " failed");
        System.out.flush();
        Runtime.getRuntime().halt(probe.failed == 0 ? 0 : 1);
    }

    private interface Check {
        String run() throws Exception;
    }

    private void run(List<String> only, String name, Check check) {
        if (!only.isEmpty() && !only.contains(name)) {
            return;
        }
        long start = System.nanoTime();
        String timing;
        try {
            String detail = check.run();
            timing = String.format("%.1fs", (System.nanoTime() - start) / 1e9);
            System.out.println("PASS " + name + " " + timing + "  " + detail);
            passed++;
        } catch (Throwable e) {
            timing = String.format("%.1fs", (System.nanoTime() - start) / 1e9);
            Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            System.out.println("FAIL " + name + " " + timing + "  " + cause);
            failed++;
        }
        System.out.flush();
    }

    private void features() {
        try {
            Map<String, FinalizedVersionRange> finalized =
                    admin.describeFeatures().featureMetadata().get().finalizedFeatures();
            FinalizedVersionRange tv = finalized.get("transaction.version");
            transactionVersion = tv == null ? 0 : tv.maxVersionLevel();
            System.out.println("INFO finalized transaction.version: "
                    + (tv == null ? "none (the client uses transaction protocol v1)" : tv.maxVersionLevel()
                    + (tv.maxVersionLevel() >= 2 ? " (the client uses transaction protocol v2, KIP-890)"
                            : " (the client uses transaction protocol v1)")));
        } catch (Exception e) {
            System.out.println("INFO DescribeFeatures failed: " + e);
        }
        if (expectedVersion != null && !expectedVersion.isEmpty()) {
            if (Short.parseShort(expectedVersion.trim()) == transactionVersion) {
                System.out.println("PASS features  finalized transaction.version " + transactionVersion + " as TXN_VERSION asks");
                passed++;
            } else {
                System.out.println("FAIL features  finalized transaction.version " + transactionVersion
                        + ", TXN_VERSION expects " + expectedVersion);
                failed++;
            }
        }
    }

    // --- checks ---

    private String commitAbort() throws Exception {
        String topic = createTopic("probe-commit-abort", 2);
        try (KafkaProducer<String, String> producer = transactional("commit-abort", 60_000)) {
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < 10; i++) {
                producer.send(new ProducerRecord<>(topic, i % 2, "k" + i, "committed-" + i));
            }
            producer.commitTransaction();
            producer.beginTransaction();
            for (int i = 0; i < 7; i++) {
                producer.send(new ProducerRecord<>(topic, i % 2, "k" + i, "aborted-" + i));
            }
            producer.flush();
            producer.abortTransaction();
        }
        List<ConsumerRecord<String, String>> committed = read(topic, "read_committed");
        List<ConsumerRecord<String, String>> all = read(topic, "read_uncommitted");
        expect(committed.size() == 10, "read_committed sees " + committed.size() + " records, expected 10: " + values(committed));
        for (ConsumerRecord<String, String> r : committed) {
            expect(r.value().startsWith("committed-"), "read_committed sees " + r.value() + " at " + r.partition() + "/" + r.offset());
            int i = Integer.parseInt(r.value().substring("committed-".length()));
            expect(r.partition() == i % 2 && r.offset() == i / 2,
                    r.value() + " at " + r.partition() + "/" + r.offset() + ", expected " + (i % 2) + "/" + (i / 2));
        }
        expect(all.size() == 17, "read_uncommitted sees " + all.size() + " records, expected 17");
        // Partition 0: 5 committed (0..4), commit marker 5, 4 aborted (6..9), abort marker 10 -> end 11.
        // Partition 1: 5 committed (0..4), commit marker 5, 3 aborted (6..8), abort marker 9 -> end 10.
        Map<Integer, Long> endCommitted = endOffsets(topic, "read_committed");
        Map<Integer, Long> endAll = endOffsets(topic, "read_uncommitted");
        expect(endCommitted.equals(Map.of(0, 11L, 1, 10L)), "read_committed end offsets " + endCommitted + ", expected {0=11, 1=10}");
        expect(endAll.equals(Map.of(0, 11L, 1, 10L)), "read_uncommitted end offsets " + endAll + ", expected {0=11, 1=10}");
        // The protocol on the wire: v2 bumps the epoch at each EndTxn (0 -> 1 -> 2), v1 keeps it.
        String id = "probe-commit-abort-" + suffix;
        int epoch = admin.describeTransactions(List.of(id)).description(id).get().producerEpoch();
        int expectedEpoch = transactionVersion >= 2 ? 2 : 0;
        expect(epoch == expectedEpoch, "producer epoch after two transactions " + epoch + ", expected " + expectedEpoch
                + " (transaction protocol v" + (transactionVersion >= 2 ? 2 : 1) + ")");
        return "read_committed 10, read_uncommitted 17, end offsets " + endAll + ", producer epoch " + epoch;
    }

    private String openTransactionLso() throws Exception {
        String topic = createTopic("probe-lso", 1);
        try (KafkaProducer<String, String> producer = transactional("lso", 60_000)) {
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, "k", "first"));
            producer.commitTransaction();
            // Offsets: 0 record, 1 marker. The open transaction starts at 2.
            producer.beginTransaction();
            for (int i = 0; i < 3; i++) {
                producer.send(new ProducerRecord<>(topic, 0, "k", "open-" + i));
            }
            producer.flush();
            Map<Integer, Long> lso = endOffsets(topic, "read_committed");
            Map<Integer, Long> hw = endOffsets(topic, "read_uncommitted");
            expect(lso.equals(Map.of(0, 2L)), "open transaction: read_committed end offset " + lso + ", expected {0=2}");
            expect(hw.equals(Map.of(0, 5L)), "open transaction: read_uncommitted end offset " + hw + ", expected {0=5}");
            List<ConsumerRecord<String, String>> visible = read(topic, "read_committed");
            expect(values(visible).equals(List.of("first")), "open transaction: read_committed sees " + values(visible));
            producer.commitTransaction();
        }
        Map<Integer, Long> lso = endOffsets(topic, "read_committed");
        List<ConsumerRecord<String, String>> visible = read(topic, "read_committed");
        expect(lso.equals(Map.of(0, 6L)), "after commit: read_committed end offset " + lso + ", expected {0=6}");
        expect(values(visible).equals(List.of("first", "open-0", "open-1", "open-2")),
                "after commit: read_committed sees " + values(visible));
        return "LSO 2 while open (high watermark 5), 6 after commit";
    }

    private String sendOffsets() throws Exception {
        String input = createTopic("probe-ctp-in", 2);
        String output = createTopic("probe-ctp-out", 2);
        String group = "probe-ctp-" + suffix;
        try (KafkaProducer<String, String> plain = plainProducer()) {
            for (int i = 0; i < 12; i++) {
                plain.send(new ProducerRecord<>(input, i % 2, "k" + i, "in-" + i));
            }
        }
        Properties cprops = Topics.consumerProps(bootstrap, "read_committed");
        cprops.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        Map<TopicPartition, OffsetAndMetadata> positions = new HashMap<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cprops, new StringDeserializer(), new StringDeserializer());
             KafkaProducer<String, String> producer = transactional("ctp", 60_000)) {
            producer.initTransactions();
            consumer.subscribe(List.of(input));
            List<ConsumerRecord<String, String>> got = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 60_000;
            while (got.size() < 12) {
                expect(System.currentTimeMillis() < deadline, "group consumer got " + got.size() + " of 12 input records in 60 s");
                consumer.poll(Duration.ofMillis(200)).forEach(got::add);
            }
            producer.beginTransaction();
            for (ConsumerRecord<String, String> r : got) {
                producer.send(new ProducerRecord<>(output, r.partition(), r.key(), r.value().replace("in-", "out-")));
            }
            for (TopicPartition tp : consumer.assignment()) {
                positions.put(tp, new OffsetAndMetadata(consumer.position(tp)));
            }
            producer.sendOffsetsToTransaction(positions, consumer.groupMetadata());
            // Before the commit the offsets are pending: OffsetFetch shows none to the Admin client, and a
            // read_committed consumer asks with require_stable, is answered UNSTABLE_OFFSET_COMMIT and retries until
            // its timeout (KIP-447).
            Map<TopicPartition, OffsetAndMetadata> pending = admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get();
            pending.values().removeIf(v -> v == null);
            expect(pending.isEmpty(), "before commit, OffsetFetch shows " + pending);
            String stable;
            try {
                stable = "answered " + consumer.committed(positions.keySet(), Duration.ofSeconds(2));
            } catch (Exception e) {
                stable = e.getClass().getName();
            }
            expect(stable.equals("org.apache.kafka.common.errors.TimeoutException"),
                    "before commit, the read_committed consumer's committed() " + stable + ", expected a retried "
                            + "UNSTABLE_OFFSET_COMMIT (TimeoutException)");
            producer.commitTransaction();

            // A second round that is aborted: neither its output nor its offsets may show.
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(output, 0, "k", "aborted"));
            Map<TopicPartition, OffsetAndMetadata> rewound = new HashMap<>();
            positions.keySet().forEach(tp -> rewound.put(tp, new OffsetAndMetadata(1)));
            producer.sendOffsetsToTransaction(rewound, consumer.groupMetadata());
            producer.abortTransaction();
        }
        Map<TopicPartition, OffsetAndMetadata> committed = admin.listConsumerGroupOffsets(group,
                new ListConsumerGroupOffsetsOptions().requireStable(true)).partitionsToOffsetAndMetadata().get();
        expect(committed.equals(positions), "group offsets " + committed + ", expected " + positions);
        expect(positions.get(new TopicPartition(input, 0)).offset() == 6 && positions.get(new TopicPartition(input, 1)).offset() == 6,
                "consumer positions " + positions + ", expected 6 and 6");
        List<ConsumerRecord<String, String>> out = read(output, "read_committed");
        expect(out.size() == 12 && out.stream().allMatch(r -> r.value().startsWith("out-")),
                "read_committed output " + values(out) + ", expected the 12 out- records");
        return "group offsets {0=6, 1=6} and 12 output records committed together; aborted round invisible";
    }

    private String fencing() throws Exception {
        String topic = createTopic("probe-fencing", 1);
        String thrown;
        try (KafkaProducer<String, String> first = transactional("fencing", 60_000)) {
            first.initTransactions();
            first.beginTransaction();
            first.send(new ProducerRecord<>(topic, 0, "k", "from-first-0"));
            first.send(new ProducerRecord<>(topic, 0, "k", "from-first-1"));
            first.flush();
            try (KafkaProducer<String, String> second = transactional("fencing", 60_000)) {
                second.initTransactions();
                try {
                    first.commitTransaction();
                    thrown = "nothing";
                } catch (Exception e) {
                    thrown = e.getClass().getName() + ": " + e.getMessage();
                }
                second.beginTransaction();
                second.send(new ProducerRecord<>(topic, 0, "k", "from-second"));
                second.commitTransaction();
            }
        }
        System.out.println("INFO fencing: the fenced producer's commitTransaction threw " + thrown);
        expect(thrown.startsWith("org.apache.kafka.common.errors.ProducerFencedException"),
                "fenced producer's commit threw " + thrown + ", expected ProducerFencedException");
        List<ConsumerRecord<String, String>> visible = read(topic, "read_committed");
        List<ConsumerRecord<String, String>> all = read(topic, "read_uncommitted");
        expect(values(visible).equals(List.of("from-second")), "read_committed sees " + values(visible) + ", expected [from-second]");
        expect(values(all).equals(List.of("from-first-0", "from-first-1", "from-second")),
                "read_uncommitted sees " + values(all));
        return "ProducerFencedException; the first producer's open transaction aborted";
    }

    private String timeout() throws Exception {
        String topic = createTopic("probe-timeout", 1);
        long timeoutMs = 3000;
        String thrown;
        long abortedAfterMs;
        try (KafkaProducer<String, String> producer = transactional("timeout", (int) timeoutMs)) {
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < 4; i++) {
                producer.send(new ProducerRecord<>(topic, 0, "k", "left-open-" + i));
            }
            producer.flush();
            long openedAt = System.currentTimeMillis();
            try (KafkaProducer<String, String> plain = plainProducer()) {
                plain.send(new ProducerRecord<>(topic, 0, "k", "plain-after")).get();
            }
            Map<Integer, Long> lso = endOffsets(topic, "read_committed");
            expect(lso.equals(Map.of(0, 0L)), "open transaction: read_committed end offset " + lso + ", expected {0=0}");
            long deadline = openedAt + 120_000;
            while (endOffsets(topic, "read_committed").get(0) == 0) {
                expect(System.currentTimeMillis() < deadline, "last stable offset still 0 after 120 s (transaction.timeout.ms " + timeoutMs + ")");
                Thread.sleep(200);
            }
            abortedAfterMs = System.currentTimeMillis() - openedAt;
            try {
                producer.commitTransaction();
                thrown = "nothing";
            } catch (Exception e) {
                thrown = e.getClass().getName() + ": " + e.getMessage();
            }
        }
        System.out.println("INFO timeout: transaction aborted after " + abortedAfterMs + " ms; the late commitTransaction threw " + thrown);
        expect(abortedAfterMs >= timeoutMs - 500, "aborted after " + abortedAfterMs + " ms, before transaction.timeout.ms " + timeoutMs);
        // The coordinator's abort bumped the producer epoch. With protocol v1 the late EndTxn is fenced
        // (PRODUCER_FENCED); with v2 (epoch bumped per transaction) the coordinator answers INVALID_TXN_STATE, as
        // Kafka 4.x does.
        String want = transactionVersion >= 2 ? "org.apache.kafka.common.errors.InvalidTxnStateException"
                : "org.apache.kafka.common.errors.ProducerFencedException";
        expect(thrown.startsWith(want), "late commitTransaction threw " + thrown + ", expected " + want);
        List<ConsumerRecord<String, String>> visible = read(topic, "read_committed");
        expect(values(visible).equals(List.of("plain-after")), "read_committed sees " + values(visible) + ", expected [plain-after]");
        expect(visible.get(0).offset() == 4, "plain-after at offset " + visible.get(0).offset() + ", expected 4");
        expect(read(topic, "read_uncommitted").size() == 5, "read_uncommitted does not see 5 records");
        return "aborted after " + abortedAfterMs + " ms; late commit threw " + thrown.replaceAll(":.*", "");
    }

    // --- helpers ---

    private static void expect(boolean condition, String message) {
        if (!condition) {
            throw new AssertionError(message);
        }
    }

    private String createTopic(String prefix, int partitions) throws Exception {
        String name = prefix + "-" + suffix;
        admin.createTopics(List.of(new NewTopic(name, partitions, (short) 1))).all().get();
        return name;
    }

    private KafkaProducer<String, String> transactional(String id, int timeoutMs) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "probe-" + id + "-" + suffix);
        props.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, timeoutMs);
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 30_000);
        return new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
    }

    private KafkaProducer<String, String> plainProducer() {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        return new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
    }

    private List<ConsumerRecord<String, String>> read(String topic, String isolation) {
        return Topics.readAll(bootstrap, topic, isolation, new StringDeserializer(), new StringDeserializer(), Duration.ofSeconds(30));
    }

    private Map<Integer, Long> endOffsets(String topic, String isolation) {
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(Topics.consumerProps(bootstrap, isolation),
                new StringDeserializer(), new StringDeserializer())) {
            List<TopicPartition> tps = Topics.assignAll(consumer, topic);
            Map<Integer, Long> out = new HashMap<>();
            consumer.endOffsets(tps, Duration.ofSeconds(30)).forEach((tp, offset) -> out.put(tp.partition(), offset));
            return out;
        }
    }

    private static List<String> values(List<ConsumerRecord<String, String>> records) {
        List<String> out = new ArrayList<>();
        records.forEach(r -> out.add(r.value()));
        return out;
    }
}
