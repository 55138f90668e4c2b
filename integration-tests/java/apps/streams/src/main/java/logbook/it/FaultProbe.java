package logbook.it;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Probes the broker's fault injector (started with {@code --fault-injection}; its admin API is served on the metrics
 * listener) with Kafka's Java client: each injected fault must give the client the behaviour the real failure in a
 * Kafka cluster gives, not merely an error on the wire. One line per check, {@code PASS name: detail} or
 * {@code FAIL name: detail}, {@code INFO} lines for facts, then {@code fault-probe: N passed, M failed}; exits 1 on a
 * failure (and on the whole run exceeding 90 s).
 *
 * <p>Checks (fixed names, so run it against a fresh broker; every fault is cleared before and after each check):
 * <ol>
 *   <li>produce-not-leader: Produce to jp-produce/0 answered NOT_LEADER_OR_FOLLOWER 3 times; an idempotent producer
 *       retries through it, the topic holds exactly v0..v9 at offsets 0..9 and the fault acted 3 times;</li>
 *   <li>produce-delay-dedup: one Produce response held 3 s, past the producer's request.timeout.ms (1 s); the
 *       producer resends the batch, the broker's idempotence drops the duplicate: exactly v0..v19 at 0..19;</li>
 *   <li>partition-unavailable: jp-moving/0 without a leader; a record is not acknowledged within 2 s, and once the
 *       fault is cleared the same send completes at offset 0, the only record of the topic;</li>
 *   <li>group-coordinator-faults: FindCoordinator for jp-group answered COORDINATOR_NOT_AVAILABLE twice and a Fetch
 *       connection dropped once; a subscribed consumer still reads the 5 records exactly once and commits;</li>
 *   <li>forced-rebalance: a forced rebalance of jp-group makes the consumer rejoin (onPartitionsAssigned again within
 *       15 s) and it goes on from its committed offset: 10 records in all, no duplicates;</li>
 *   <li>fence: fencing transactional id jp-tx makes the producer's commitTransaction fail as a second producer's
 *       InitProducerId would (ProducerFencedException), and its open transaction is aborted (read_committed sees
 *       none of its records).</li>
 * </ol>
 * Usage: FaultProbe BOOTSTRAP FAULT_URL (e.g. http://127.0.0.1:9644, the broker's metrics listener)
 */
public final class FaultProbe {
    private static final long RUN_LIMIT_MS = 90_000;

    private final String bootstrap;
    private final String faultUrl;
    private final Admin admin;
    private final HttpClient http = HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(5)).build();
    private int passed;
    private int failed;

    /** The group consumer shared by group-coordinator-faults and forced-rebalance. */
    private KafkaConsumer<String, String> groupConsumer;
    private final AtomicInteger assignments = new AtomicInteger();
    private final List<ConsumerRecord<String, String>> groupRecords = new ArrayList<>();

    private FaultProbe(String bootstrap, String faultUrl) {
        this.bootstrap = bootstrap;
        this.faultUrl = faultUrl.replaceAll("/+$", "").replaceAll("/faults$", "");
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        this.admin = Admin.create(props);
    }

    public static void main(String[] args) {
        if (args.length < 2) {
            System.err.println("usage: FaultProbe BOOTSTRAP FAULT_URL");
            System.exit(2);
        }
        FaultProbe probe = new FaultProbe(args[0], args[1]);
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(RUN_LIMIT_MS);
            } catch (InterruptedException e) {
                return;
            }
            synchronized (probe) {
                System.out.println("FAIL time-limit: the probe ran longer than " + RUN_LIMIT_MS / 1000 + " s");
                System.out.println("fault-probe: " + probe.passed + " passed, " + (probe.failed + 1) + " failed");
                System.out.flush();
                Runtime.getRuntime().halt(1);
            }
        }, "fault-probe-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();

        probe.run("produce-not-leader", probe::produceNotLeader);
        probe.run("produce-delay-dedup", probe::produceDelayDedup);
        probe.run("partition-unavailable", probe::partitionUnavailable);
        probe.run("group-coordinator-faults", probe::groupCoordinatorFaults);
        probe.run("forced-rebalance", probe::forcedRebalance);
        if (probe.groupConsumer != null) {
            probe.groupConsumer.close(Duration.ofSeconds(5));
        }
        probe.run("fence", probe::fence);
        probe.admin.close(Duration.ofSeconds(5));
        synchronized (probe) {
            System.out.println("fault-probe: " + probe.passed + " passed, " + probe.failed + " failed");
            System.out.flush();
            Runtime.getRuntime().halt(probe.failed == 0 ? 0 : 1);
        }
    }

    private interface Check {
        String run() throws Exception;
    }

    private void run(String name, Check check) {
        long start = System.nanoTime();
        String line;
        boolean ok;
        try {
            clearFaults();
            String detail = check.run();
            clearFaults();
            line = "PASS " + name + ": " + detail;
            ok = true;
        } catch (Throwable e) {
            Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            line = "FAIL " + name + ": " + cause;
            ok = false;
            try {
                clearFaults();
            } catch (Throwable ignored) {
                // the check has failed already
            }
        }
        synchronized (this) {
            System.out.println(line + String.format(" (%.1fs)", (System.nanoTime() - start) / 1e9));
            System.out.flush();
            if (ok) {
                passed++;
            } else {
                failed++;
            }
        }
    }

    // --- checks ---

    private String produceNotLeader() throws Exception {
        String topic = createTopic("jp-produce");
        long fault = inject("{\"kind\":\"error\",\"api\":\"Produce\",\"topic\":\"" + topic
                + "\",\"partition\":0,\"error\":\"NOT_LEADER_OR_FOLLOWER\",\"count\":3}");
        List<Long> offsets = new ArrayList<>();
        double retries;
        try (KafkaProducer<String, String> producer = producer(Map.of())) {
            for (int i = 0; i < 10; i++) {
                RecordMetadata md = producer.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i)).get(30, TimeUnit.SECONDS);
                offsets.add(md.offset());
            }
            retries = metric(producer, "record-retry-total");
        }
        expect(offsets.equals(range(0, 10)), "acknowledged offsets " + offsets + ", expected 0..9");
        expectExactly(topic, 10);
        long injected = injected(fault);
        expect(injected == 3, "fault " + fault + " injected " + injected + " times, expected 3");
        expect(retries == 3, "the producer retried " + retries + " records, expected 3 (one per NOT_LEADER_OR_FOLLOWER)");
        return "10 records acknowledged at 0..9 after 3 NOT_LEADER_OR_FOLLOWER answers and 3 retries; topic holds v0..v9";
    }

    private String produceDelayDedup() throws Exception {
        String topic = "jp-produce";
        long fault = inject("{\"kind\":\"delay\",\"api\":\"Produce\",\"topic\":\"" + topic
                + "\",\"partition\":0,\"delay_ms\":3000,\"count\":1}");
        List<Long> offsets = new ArrayList<>();
        double retries;
        long start = System.nanoTime();
        try (KafkaProducer<String, String> producer = producer(Map.of(
                ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 1000,
                ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30_000,
                ProducerConfig.LINGER_MS_CONFIG, 0,
                ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, 1))) {
            for (int i = 10; i < 20; i++) {
                RecordMetadata md = producer.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i)).get(30, TimeUnit.SECONDS);
                offsets.add(md.offset());
            }
            retries = metric(producer, "record-retry-total");
        }
        long tookMs = (System.nanoTime() - start) / 1_000_000;
        expect(offsets.equals(range(10, 20)), "acknowledged offsets " + offsets + ", expected 10..19");
        long injected = injected(fault);
        expect(injected == 1, "fault " + fault + " injected " + injected + " times, expected 1");
        // The first record's request timed out (1 s) and its batch was sent again.
        expect(retries == 1, "the producer retried " + retries + " records, expected 1 (the timed-out batch)");
        expect(tookMs >= 1000, "10 records acknowledged in " + tookMs + " ms, before the 1 s request timeout");
        expectExactly(topic, 20);
        return "a Produce response held 3 s past request.timeout.ms 1 s, the batch resent once (" + tookMs
                + " ms) and deduplicated: v0..v19 at 0..19";
    }

    private String partitionUnavailable() throws Exception {
        String topic = createTopic("jp-moving");
        long fault = inject("{\"kind\":\"partition_unavailable\",\"topic\":\"" + topic + "\",\"partition\":0}");
        try (KafkaProducer<String, String> producer = producer(Map.of(ProducerConfig.MAX_BLOCK_MS_CONFIG, 10_000))) {
            Future<RecordMetadata> future = producer.send(new ProducerRecord<>(topic, 0, "k", "moving-0"));
            String early;
            try {
                early = "acknowledged at offset " + future.get(2, TimeUnit.SECONDS).offset();
            } catch (java.util.concurrent.TimeoutException e) {
                early = "timeout";
            } catch (ExecutionException e) {
                early = "failed: " + e.getCause();
            }
            expect(early.equals("timeout"), "with the partition unavailable the send " + early
                    + ", expected no acknowledgement within 2 s (TimeoutException)");
            expect(!future.isDone(), "the send is done while the partition is unavailable");
            long injected = injected(fault);
            System.out.println("INFO partition-unavailable: fault " + fault + " acted " + injected + " times before clearing");
            delete("/faults/" + fault);
            RecordMetadata md = future.get(30, TimeUnit.SECONDS);
            expect(md.offset() == 0, "after clearing, the record went to offset " + md.offset() + ", expected 0");
        }
        List<ConsumerRecord<String, String>> all = readAll(topic, "read_uncommitted");
        expect(values(all).equals(List.of("moving-0")), "jp-moving holds " + values(all) + ", expected [moving-0]");
        return "no acknowledgement within 2 s while leaderless; after clearing the same send completed at offset 0";
    }

    private String groupCoordinatorFaults() throws Exception {
        String topic = createTopic("jp-grouped");
        String group = "jp-group";
        try (KafkaProducer<String, String> producer = producer(Map.of())) {
            for (int i = 0; i < 5; i++) {
                producer.send(new ProducerRecord<>(topic, 0, "k" + i, "g" + i)).get(30, TimeUnit.SECONDS);
            }
        }
        long findFault = inject("{\"kind\":\"error\",\"api\":\"FindCoordinator\",\"group\":\"" + group
                + "\",\"error\":\"COORDINATOR_NOT_AVAILABLE\",\"count\":2}");
        long dropFault = inject("{\"kind\":\"drop_connection\",\"api\":\"Fetch\",\"topic\":\"" + topic + "\",\"count\":1}");
        Properties props = consumerProps("read_uncommitted");
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        groupConsumer = new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer());
        groupConsumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                int n = assignments.incrementAndGet();
                System.out.println("INFO group consumer: onPartitionsAssigned #" + n + " " + partitions);
            }
        });
        pollUntil(5, 30_000);
        expectGroupRecords(5);
        groupConsumer.commitSync(Duration.ofSeconds(10));
        long findInjected = injected(findFault);
        long dropInjected = injected(dropFault);
        expect(findInjected == 2, "FindCoordinator fault injected " + findInjected + " times, expected 2");
        expect(dropInjected == 1, "Fetch drop_connection fault injected " + dropInjected + " times, expected 1");
        return "g0..g4 read once through 2 COORDINATOR_NOT_AVAILABLE answers and a dropped Fetch connection; commitSync ok";
    }

    private String forcedRebalance() throws Exception {
        expect(groupConsumer != null && groupRecords.size() == 5, "group-coordinator-faults did not leave a consumer at 5 records");
        String topic = "jp-grouped";
        int before = assignments.get();
        String[] answer = post("{\"kind\":\"rebalance\",\"group\":\"jp-group\"}");
        expect(answer[0].equals("200"), "POST rebalance answered " + answer[0] + " " + answer[1].trim());
        expect(answer[1].contains("\"group jp-group is rebalancing\""), "POST rebalance answered " + answer[1].trim());
        long start = System.currentTimeMillis();
        while (assignments.get() == before) {
            expect(System.currentTimeMillis() - start < 15_000, "onPartitionsAssigned not called again within 15 s");
            groupConsumer.poll(Duration.ofMillis(200)).forEach(groupRecords::add);
        }
        long rejoinMs = System.currentTimeMillis() - start;
        try (KafkaProducer<String, String> producer = producer(Map.of())) {
            for (int i = 5; i < 10; i++) {
                producer.send(new ProducerRecord<>(topic, 0, "k" + i, "g" + i)).get(30, TimeUnit.SECONDS);
            }
        }
        pollUntil(10, 20_000);
        // Anything late (a duplicate) would show in a few more polls.
        long settle = System.currentTimeMillis() + 1000;
        while (System.currentTimeMillis() < settle) {
            groupConsumer.poll(Duration.ofMillis(200)).forEach(groupRecords::add);
        }
        expectGroupRecords(10);
        return "onPartitionsAssigned #" + assignments.get() + " after " + rejoinMs + " ms; g0..g9 read once, no duplicates";
    }

    private String fence() throws Exception {
        String topic = createTopic("jp-fenced");
        String thrown;
        String kind;
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "jp-tx");
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 20_000);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props, new StringSerializer(), new StringSerializer())) {
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, "k", "fenced-0"));
            producer.send(new ProducerRecord<>(topic, 0, "k", "fenced-1"));
            producer.flush();
            String[] answer = post("{\"kind\":\"fence\",\"transactional_id\":\"jp-tx\"}");
            expect(answer[0].equals("200"), "POST fence answered " + answer[0] + " " + answer[1].trim());
            System.out.println("INFO fence: " + answer[1].trim());
            Throwable error = null;
            try {
                producer.commitTransaction();
            } catch (Exception e) {
                error = e;
            }
            expect(error != null, "commitTransaction succeeded after the fence");
            thrown = error.getClass().getName() + ": " + error.getMessage();
            if (error instanceof ProducerFencedException) {
                kind = "ProducerFencedException";
            } else if (error instanceof InvalidProducerEpochException) {
                kind = "InvalidProducerEpochException";
            } else if (error instanceof KafkaException && error.getCause() instanceof ProducerFencedException) {
                kind = "KafkaException caused by ProducerFencedException";
            } else if (error instanceof KafkaException && error.getCause() instanceof InvalidProducerEpochException) {
                kind = "KafkaException caused by InvalidProducerEpochException";
            } else {
                throw new AssertionError("commitTransaction threw " + thrown + " (cause " + error.getCause()
                        + "), expected ProducerFencedException or InvalidProducerEpochException");
            }
            System.out.println("INFO fence: commitTransaction threw " + thrown);
        }
        // The transaction must be aborted, not merely left open (an open one also hides its records): the last
        // stable offset is past the 2 records and the abort marker.
        long lso = endOffset(topic, "read_committed");
        expect(lso == 3, "read_committed end offset (last stable offset) " + lso + ", expected 3 (2 records, abort marker)");
        List<ConsumerRecord<String, String>> committed = readAll(topic, "read_committed");
        expect(committed.isEmpty(), "read_committed sees " + values(committed) + ", expected none");
        List<ConsumerRecord<String, String>> all = readAll(topic, "read_uncommitted");
        expect(values(all).equals(List.of("fenced-0", "fenced-1")), "read_uncommitted sees " + values(all)
                + ", expected [fenced-0, fenced-1]");
        return "commitTransaction threw " + kind + "; the transaction aborted (last stable offset 3), read_committed "
                + "sees none of the 2 records";
    }

    // --- group consumer ---

    private void pollUntil(int count, long timeoutMs) {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (groupRecords.size() < count) {
            expect(System.currentTimeMillis() < deadline, "group consumer read " + groupRecords.size() + " of "
                    + count + " records in " + timeoutMs / 1000 + " s: " + values(groupRecords));
            groupConsumer.poll(Duration.ofMillis(200)).forEach(groupRecords::add);
        }
    }

    private void expectGroupRecords(int count) {
        List<String> want = new ArrayList<>();
        List<Long> wantOffsets = range(0, count);
        for (int i = 0; i < count; i++) {
            want.add("g" + i);
        }
        List<Long> offsets = new ArrayList<>();
        groupRecords.forEach(r -> offsets.add(r.offset()));
        expect(values(groupRecords).equals(want) && offsets.equals(wantOffsets), "group consumer read "
                + values(groupRecords) + " at " + offsets + ", expected " + want + " at " + wantOffsets);
    }

    // --- fault API ---

    private long inject(String spec) throws Exception {
        String[] answer = post(spec);
        expect(answer[0].equals("200"), "POST /faults " + spec + " answered " + answer[0] + " " + answer[1].trim());
        Matcher m = Pattern.compile("\"id\"\\s*:\\s*(\\d+)").matcher(answer[1]);
        expect(m.find(), "POST /faults answered without an id: " + answer[1].trim());
        expect(answer[1].matches("(?s).*\"injected\"\\s*:\\s*0\\b.*") && answer[1].matches("(?s).*\"armed\"\\s*:\\s*true\\b.*"),
                "POST /faults answered " + answer[1].trim() + ", expected injected 0 and armed true");
        return Long.parseLong(m.group(1));
    }

    /** How often fault {@code id} acted, from GET /faults. */
    private long injected(long id) throws Exception {
        HttpResponse<String> response = http.send(HttpRequest.newBuilder(URI.create(faultUrl + "/faults"))
                .timeout(Duration.ofSeconds(10)).GET().build(), HttpResponse.BodyHandlers.ofString());
        expect(response.statusCode() == 200, "GET /faults answered " + response.statusCode() + " " + response.body());
        Matcher objects = Pattern.compile("\\{[^{}]*\\}").matcher(response.body());
        Pattern idField = Pattern.compile("\"id\"\\s*:\\s*" + id + "\\b");
        Pattern injectedField = Pattern.compile("\"injected\"\\s*:\\s*(\\d+)");
        while (objects.find()) {
            String object = objects.group();
            if (idField.matcher(object).find()) {
                Matcher m = injectedField.matcher(object);
                expect(m.find(), "GET /faults: fault " + id + " without injected: " + object);
                return Long.parseLong(m.group(1));
            }
        }
        throw new AssertionError("GET /faults does not list fault " + id + ": " + response.body().trim());
    }

    private String[] post(String spec) throws Exception {
        HttpResponse<String> response = http.send(HttpRequest.newBuilder(URI.create(faultUrl + "/faults"))
                .timeout(Duration.ofSeconds(40)).header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(spec)).build(), HttpResponse.BodyHandlers.ofString());
        return new String[] {Integer.toString(response.statusCode()), response.body()};
    }

    private void delete(String path) throws Exception {
        HttpResponse<String> response = http.send(HttpRequest.newBuilder(URI.create(faultUrl + path))
                .timeout(Duration.ofSeconds(10)).DELETE().build(), HttpResponse.BodyHandlers.ofString());
        expect(response.statusCode() == 200, "DELETE " + path + " answered " + response.statusCode() + " " + response.body().trim());
    }

    private void clearFaults() throws Exception {
        delete("/faults");
    }

    // --- helpers ---

    private static void expect(boolean condition, String message) {
        if (!condition) {
            throw new AssertionError(message);
        }
    }

    private String createTopic(String name) throws Exception {
        admin.createTopics(List.of(new NewTopic(name, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
        return name;
    }

    private KafkaProducer<String, String> producer(Map<String, Object> overrides) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.putAll(overrides);
        return new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
    }

    private Properties consumerProps(String isolation) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        return props;
    }

    private long endOffset(String topic, String isolation) {
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(isolation),
                new StringDeserializer(), new StringDeserializer())) {
            TopicPartition tp = new TopicPartition(topic, 0);
            return consumer.endOffsets(List.of(tp), Duration.ofSeconds(15)).get(tp);
        }
    }

    private static double metric(KafkaProducer<String, String> producer, String name) {
        for (var e : producer.metrics().entrySet()) {
            if (e.getKey().name().equals(name) && e.getKey().group().equals("producer-metrics")) {
                return ((Number) e.getValue().metricValue()).doubleValue();
            }
        }
        throw new AssertionError("producer metric " + name + " not found");
    }

    /** Every record of partition 0 of {@code topic} up to its end offset (the last stable offset for read_committed). */
    private List<ConsumerRecord<String, String>> readAll(String topic, String isolation) {
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(isolation),
                new StringDeserializer(), new StringDeserializer())) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long end = consumer.endOffsets(List.of(tp), Duration.ofSeconds(15)).get(tp);
            List<ConsumerRecord<String, String>> out = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 15_000;
            while (consumer.position(tp, Duration.ofSeconds(15)) < end) {
                expect(System.currentTimeMillis() < deadline, "reading " + topic + " (" + isolation
                        + ") did not reach end offset " + end + " within 15 s");
                consumer.poll(Duration.ofMillis(200)).forEach(out::add);
            }
            return out;
        }
    }

    /** Asserts that {@code topic} holds exactly v0..v(n-1) at offsets 0..n-1, each once. */
    private void expectExactly(String topic, int n) {
        List<ConsumerRecord<String, String>> all = readAll(topic, "read_uncommitted");
        List<String> want = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            want.add("v" + i);
        }
        List<Long> offsets = new ArrayList<>();
        all.forEach(r -> offsets.add(r.offset()));
        Set<String> distinct = new HashSet<>(values(all));
        expect(values(all).equals(want) && offsets.equals(range(0, n)) && distinct.size() == n,
                topic + " holds " + values(all) + " at " + offsets + ", expected v0..v" + (n - 1) + " at 0.." + (n - 1));
    }

    private static List<Long> range(long from, long to) {
        List<Long> out = new ArrayList<>();
        for (long i = from; i < to; i++) {
            out.add(i);
        }
        return out;
    }

    private static List<String> values(List<ConsumerRecord<String, String>> records) {
        List<String> out = new ArrayList<>();
        records.forEach(r -> out.add(r.value()));
        return out;
    }
}
