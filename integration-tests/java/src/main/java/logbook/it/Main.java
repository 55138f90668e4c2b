package logbook.it;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.errors.InvalidReplicationFactorException;
import org.apache.kafka.common.errors.InvalidTopicException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.Utils;

/**
 * Runs a sequence of checks of Logbook against Apache Kafka's Java client.
 * Usage: Main BOOTSTRAP [check-prefix...]. Prints one PASS/FAIL/INFO line per check and
 * exits 1 if any check failed. Optional prefixes (e.g. "1" "3b") run only matching checks.
 */
public final class Main {

    static String bootstrap;
    static final String RUN = UUID.randomUUID().toString().substring(0, 8);
    static int passed, failed;
    static List<String> only = List.of();

    interface Body { void run() throws Exception; }

    static void check(String id, String name, Body body) {
        if (!only.isEmpty() && only.stream().noneMatch(id::startsWith)) return;
        long t0 = System.nanoTime();
        System.out.printf("---- %s %s%n", id, name);
        System.out.flush();
        try {
            body.run();
            passed++;
            System.out.printf("PASS %s %s (%d ms)%n", id, name, (System.nanoTime() - t0) / 1_000_000);
        } catch (Throwable t) {
            failed++;
            System.out.printf("FAIL %s %s (%d ms): %s%n", id, name, (System.nanoTime() - t0) / 1_000_000, describe(t));
        }
        System.out.flush();
    }

    /** Like check, but never counts as a failure (for features not yet expected to work). */
    static void info(String id, String name, Body body) {
        if (!only.isEmpty() && only.stream().noneMatch(id::startsWith)) return;
        long t0 = System.nanoTime();
        System.out.printf("---- %s %s%n", id, name);
        try {
            body.run();
            System.out.printf("INFO %s %s: worked (%d ms)%n", id, name, (System.nanoTime() - t0) / 1_000_000);
        } catch (Throwable t) {
            System.out.printf("INFO %s %s: did not work (%d ms): %s%n", id, name, (System.nanoTime() - t0) / 1_000_000, describe(t));
        }
        System.out.flush();
    }

    static String describe(Throwable t) {
        StringBuilder sb = new StringBuilder();
        Throwable c = t;
        int depth = 0;
        while (c != null && depth < 5) {
            if (depth > 0) sb.append("\n     caused by: ");
            sb.append(c.getClass().getName()).append(": ").append(c.getMessage());
            StackTraceElement[] st = c.getStackTrace();
            for (int i = 0; i < Math.min(4, st.length); i++) sb.append("\n       at ").append(st[i]);
            c = c.getCause() == c ? null : c.getCause();
            depth++;
        }
        return sb.toString();
    }

    static void ensure(boolean cond, String fmt, Object... args) {
        if (!cond) throw new AssertionError(String.format(fmt, args));
    }

    static void note(String fmt, Object... args) {
        System.out.printf("     " + fmt + "%n", args);
    }

    /** Runs future.get() and requires that it fail with the given cause type. */
    static void expectFailure(Future<?> f, Class<? extends Throwable> type) throws Exception {
        try {
            Object v = f.get(30, TimeUnit.SECONDS);
            throw new AssertionError("expected " + type.getSimpleName() + " but succeeded with " + v);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (!type.isInstance(cause)) {
                throw new AssertionError("expected " + type.getName() + " but got " + cause, cause);
            }
            note("got expected %s: %s", cause.getClass().getSimpleName(), cause.getMessage());
        }
    }

    static Properties common() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return p;
    }

    static Admin admin() { return Admin.create(common()); }

    static KafkaProducer<String, String> producer(Map<String, Object> extra) {
        Properties p = common();
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.putAll(extra);
        return new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
    }

    static KafkaConsumer<String, String> consumer(Map<String, Object> extra) {
        Properties p = common();
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.putAll(extra);
        return new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }

    static void createTopic(Admin admin, String name, int partitions, Map<String, String> configs) throws Exception {
        admin.createTopics(List.of(new NewTopic(name, partitions, (short) 1).configs(configs))).all().get(30, TimeUnit.SECONDS);
    }

    static List<TopicPartition> partitions(String topic, int n) {
        List<TopicPartition> l = new ArrayList<>();
        for (int i = 0; i < n; i++) l.add(new TopicPartition(topic, i));
        return l;
    }

    /** Reads from the beginning of every partition until `expected` records arrive or timeout. */
    static List<ConsumerRecord<String, String>> readAll(KafkaConsumer<String, String> c, Collection<TopicPartition> tps, int expected) {
        c.assign(tps);
        c.seekToBeginning(tps);
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 30_000;
        while (out.size() < expected && System.currentTimeMillis() < deadline) {
            ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(500));
            rs.forEach(out::add);
        }
        // One more short poll: nothing beyond what was produced should appear.
        c.poll(Duration.ofMillis(300)).forEach(out::add);
        ensure(out.size() == expected, "read %d records, expected %d", out.size(), expected);
        return out;
    }

    // ---------------------------------------------------------------- state shared between checks
    static final int N = 1000;
    static final String MAIN_TOPIC = "jt-main-" + RUN;
    static final long BASE_TS = System.currentTimeMillis() - 3_600_000L; // an hour ago, within retention
    /** key -> metadata of the produced record */
    static final Map<String, RecordMetadata> produced = new HashMap<>();
    static final Map<Integer, Long> perPartitionCount = new TreeMap<>();

    static String key(int i) { return "key-" + i; }
    static String value(int i) { return "value-" + i + "-" + "x".repeat(i % 50); }
    static long ts(int i) { return BASE_TS + i * 10L; }

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: Main BOOTSTRAP_HOST:PORT [check-id-prefix ...]");
            System.exit(2);
        }
        bootstrap = args[0];
        only = Arrays.asList(args).subList(1, args.length);
        System.out.printf("Logbook Java-client checks against %s (kafka-clients %s), run id %s%n",
                bootstrap, org.apache.kafka.common.utils.AppInfoParser.getVersion(), RUN);

        adminChecks();
        producerChecks();
        consumerChecks();
        tooLargeChecks();
        groupChecks();

        System.out.printf("%n%d passed, %d failed%n", passed, failed);
        System.exit(failed == 0 ? 0 : 1);
    }

    // ---------------------------------------------------------------- 1. Admin
    static void adminChecks() {
        String topic = "jt-admin-" + RUN;
        try (Admin admin = admin()) {
            check("1a", "createTopics 3 partitions with retention.ms + cleanup.policy=delete", () -> {
                var res = admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1)
                        .configs(Map.of("retention.ms", "86400000", "cleanup.policy", "delete"))));
                res.all().get(30, TimeUnit.SECONDS);
                int np = res.numPartitions(topic).get();
                int rf = res.replicationFactor(topic).get();
                Uuid id = res.topicId(topic).get();
                ensure(np == 3, "numPartitions=%d", np);
                ensure(rf == 1, "replicationFactor=%d", rf);
                ensure(id != null && !Uuid.ZERO_UUID.equals(id), "topicId=%s", id);
                var cfg = res.config(topic).get();
                note("created: partitions=%d rf=%d id=%s; returned configs: retention.ms=%s cleanup.policy=%s", np, rf, id,
                        cfg == null || cfg.get("retention.ms") == null ? null : cfg.get("retention.ms").value(),
                        cfg == null || cfg.get("cleanup.policy") == null ? null : cfg.get("cleanup.policy").value());
            });
            check("1b", "createTopics again -> TopicExistsException", () ->
                    expectFailure(admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all(), TopicExistsException.class));
            check("1c", "createTopics invalid name -> InvalidTopicException", () ->
                    expectFailure(admin.createTopics(List.of(new NewTopic("bad name!*", 1, (short) 1))).all(), InvalidTopicException.class));
            check("1c2", "createTopics name '..' -> InvalidTopicException", () ->
                    expectFailure(admin.createTopics(List.of(new NewTopic("..", 1, (short) 1))).all(), InvalidTopicException.class));
            check("1d", "createTopics replication factor 3 -> InvalidReplicationFactorException", () ->
                    expectFailure(admin.createTopics(List.of(new NewTopic("jt-rf3-" + RUN, 1, (short) 3))).all(),
                            InvalidReplicationFactorException.class));
            check("1e", "listTopics contains the topic", () -> {
                Set<String> names = admin.listTopics().names().get(30, TimeUnit.SECONDS);
                ensure(names.contains(topic), "listTopics=%s lacks %s", names, topic);
                ensure(!names.contains("jt-rf3-" + RUN), "failed RF=3 topic exists anyway: %s", names);
            });
            check("1f", "describeTopics: 3 partitions, leader, topic id", () -> {
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
                ensure(d != null, "no description");
                ensure(d.partitions().size() == 3, "partitions=%s", d.partitions());
                ensure(d.topicId() != null && !Uuid.ZERO_UUID.equals(d.topicId()), "topicId=%s", d.topicId());
                ensure(!d.isInternal(), "internal?");
                for (int i = 0; i < 3; i++) {
                    TopicPartitionInfo p = d.partitions().get(i);
                    ensure(p.partition() == i, "partition index %d at position %d", p.partition(), i);
                    ensure(p.leader() != null && !p.leader().isEmpty(), "partition %d has no leader", i);
                    ensure(p.replicas().size() == 1 && p.isr().size() == 1, "partition %d replicas=%s isr=%s", i, p.replicas(), p.isr());
                }
                note("topicId=%s leader=%s", d.topicId(), d.partitions().get(0).leader());
                // Describe by id too.
                var byId = admin.describeTopics(org.apache.kafka.common.TopicCollection.ofTopicIds(List.of(d.topicId())))
                        .allTopicIds().get(30, TimeUnit.SECONDS);
                ensure(byId.containsKey(d.topicId()) && byId.get(d.topicId()).name().equals(topic), "describe by id gave %s", byId);
            });
            check("1g", "describeCluster: cluster id, node", () -> {
                DescribeClusterResult r = admin.describeCluster();
                String cid = r.clusterId().get(30, TimeUnit.SECONDS);
                Collection<Node> nodes = r.nodes().get();
                Node controller = r.controller().get();
                ensure(cid != null && !cid.isEmpty(), "clusterId=%s", cid);
                ensure(nodes.size() == 1, "nodes=%s", nodes);
                Node n = nodes.iterator().next();
                ensure(n.port() == Integer.parseInt(bootstrap.substring(bootstrap.lastIndexOf(':') + 1)), "node=%s", n);
                note("clusterId=%s nodes=%s controller=%s", cid, nodes, controller);
            });
            info("1h", "describeConfigs on the topic (not in the implemented API list)", () -> {
                var res = admin.describeConfigs(List.of(new org.apache.kafka.common.config.ConfigResource(
                        org.apache.kafka.common.config.ConfigResource.Type.TOPIC, topic))).all().get(15, TimeUnit.SECONDS);
                res.values().forEach(c -> note("retention.ms=%s cleanup.policy=%s", c.get("retention.ms"), c.get("cleanup.policy")));
            });
            check("1i", "deleteTopics, then listTopics no longer has it", () -> {
                admin.deleteTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
                Set<String> names = admin.listTopics().names().get(30, TimeUnit.SECONDS);
                ensure(!names.contains(topic), "topic still listed: %s", names);
            });
            check("1j", "recreate deleted topic name gives a new topic id and empty partitions", () -> {
                var res = admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1)));
                res.all().get(30, TimeUnit.SECONDS);
                var ends = admin.listOffsets(Map.of(new TopicPartition(topic, 0), OffsetSpec.latest())).all().get(30, TimeUnit.SECONDS);
                ensure(ends.get(new TopicPartition(topic, 0)).offset() == 0, "end offset %s", ends);
                admin.deleteTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
            });
            check("1k", "deleteTopics by topic id", () -> {
                String t = "jt-delid-" + RUN;
                var res = admin.createTopics(List.of(new NewTopic(t, 1, (short) 1)));
                Uuid id = res.topicId(t).get(30, TimeUnit.SECONDS);
                admin.deleteTopics(org.apache.kafka.common.TopicCollection.ofTopicIds(List.of(id))).all().get(30, TimeUnit.SECONDS);
                Set<String> names = admin.listTopics().names().get(30, TimeUnit.SECONDS);
                ensure(!names.contains(t), "topic still listed after delete by id: %s", names);
            });
        }
    }

    // ---------------------------------------------------------------- 2. Producer
    static void producerChecks() {
        check("2a", "producer (defaults: idempotent, acks=all) 1000 keyed records with headers; offsets contiguous from 0", () -> {
            try (Admin admin = admin()) {
                createTopic(admin, MAIN_TOPIC, 3, Map.of());
            }
            try (KafkaProducer<String, String> p = producer(Map.of())) {
                List<Future<RecordMetadata>> fs = new ArrayList<>();
                for (int i = 0; i < N; i++) {
                    List<Header> hs = List.of(new RecordHeader("idx", Integer.toString(i).getBytes(StandardCharsets.UTF_8)),
                            new RecordHeader("run", RUN.getBytes(StandardCharsets.UTF_8)),
                            new RecordHeader("nullhdr", null));
                    fs.add(p.send(new ProducerRecord<>(MAIN_TOPIC, null, ts(i), key(i), value(i), hs)));
                }
                p.flush();
                Map<Integer, List<Long>> offs = new TreeMap<>();
                for (int i = 0; i < N; i++) {
                    RecordMetadata md = fs.get(i).get(30, TimeUnit.SECONDS);
                    produced.put(key(i), md);
                    offs.computeIfAbsent(md.partition(), k -> new ArrayList<>()).add(md.offset());
                    int expectedPartition = Utils.toPositive(Utils.murmur2(key(i).getBytes(StandardCharsets.UTF_8))) % 3;
                    ensure(md.partition() == expectedPartition, "key %s went to %d, default partitioner says %d", key(i), md.partition(), expectedPartition);
                    ensure(md.hasOffset(), "no offset for %d", i);
                    ensure(md.timestamp() == ts(i), "record %d: metadata timestamp %d != %d", i, md.timestamp(), ts(i));
                }
                for (var e : offs.entrySet()) {
                    List<Long> l = e.getValue();
                    for (int j = 0; j < l.size(); j++) {
                        ensure(l.get(j) == j, "partition %d: offset at position %d is %d (offsets %s...)", e.getKey(), j, l.get(j),
                                l.subList(0, Math.min(20, l.size())));
                    }
                    perPartitionCount.put(e.getKey(), (long) l.size());
                }
                ensure(offs.size() == 3, "records landed in partitions %s", offs.keySet());
                note("per-partition counts %s", perPartitionCount);
            }
        });
        for (String codec : List.of("gzip", "snappy", "lz4", "zstd")) {
            check("2b-" + codec, "compression.type=" + codec + ": produce 500, offsets contiguous, read back intact", () -> {
                String topic = "jt-" + codec + "-" + RUN;
                try (Admin admin = admin()) {
                    createTopic(admin, topic, 1, Map.of());
                }
                int n = 500;
                try (KafkaProducer<String, String> p = producer(Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec,
                        ProducerConfig.LINGER_MS_CONFIG, "20"))) {
                    List<Future<RecordMetadata>> fs = new ArrayList<>();
                    for (int i = 0; i < n; i++) fs.add(p.send(new ProducerRecord<>(topic, key(i), value(i) + "-" + codec)));
                    p.flush();
                    for (int i = 0; i < n; i++) {
                        long off = fs.get(i).get(30, TimeUnit.SECONDS).offset();
                        ensure(off == i, "record %d got offset %d", i, off);
                    }
                }
                try (KafkaConsumer<String, String> c = consumer(Map.of())) {
                    var rs = readAll(c, List.of(new TopicPartition(topic, 0)), n);
                    for (int i = 0; i < n; i++) {
                        var r = rs.get(i);
                        ensure(r.offset() == i && r.key().equals(key(i)) && r.value().equals(value(i) + "-" + codec),
                                "record %d read back as offset=%d key=%s", i, r.offset(), r.key());
                    }
                }
            });
        }
        check("2c", "producer acks=0 and acks=1 each deliver (read back)", () -> {
            String topic = "jt-acks-" + RUN;
            try (Admin admin = admin()) { createTopic(admin, topic, 1, Map.of()); }
            for (String acks : List.of("0", "1")) {
                try (KafkaProducer<String, String> p = producer(Map.of(ProducerConfig.ACKS_CONFIG, acks,
                        ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false"))) {
                    for (int i = 0; i < 50; i++) p.send(new ProducerRecord<>(topic, "acks" + acks, "v" + i)).get(30, TimeUnit.SECONDS);
                }
            }
            try (KafkaConsumer<String, String> c = consumer(Map.of())) {
                readAll(c, List.of(new TopicPartition(topic, 0)), 100);
            }
        });
    }

    // ---------------------------------------------------------------- 3. Consumer
    static void verifyMain(List<ConsumerRecord<String, String>> rs) {
        Map<String, ConsumerRecord<String, String>> byKey = new HashMap<>();
        Map<Integer, Long> nextOffset = new HashMap<>();
        for (var r : rs) {
            ensure(byKey.put(r.key(), r) == null, "duplicate key %s", r.key());
            long exp = nextOffset.getOrDefault(r.partition(), 0L);
            ensure(r.offset() == exp, "partition %d: offset %d where %d expected", r.partition(), r.offset(), exp);
            nextOffset.put(r.partition(), exp + 1);
        }
        for (int i = 0; i < N; i++) {
            var r = byKey.get(key(i));
            ensure(r != null, "key %s missing", key(i));
            RecordMetadata md = produced.get(key(i));
            ensure(md == null || (md.partition() == r.partition() && md.offset() == r.offset()),
                    "key %s read at %d/%d but produced at %s", key(i), r.partition(), r.offset(), md);
            ensure(r.value().equals(value(i)), "key %s value %s", key(i), r.value());
            ensure(r.timestamp() == ts(i), "key %s timestamp %d != %d (%s)", key(i), r.timestamp(), ts(i), r.timestampType());
            Header[] hs = r.headers().toArray();
            ensure(hs.length == 3, "key %s has %d headers", key(i), hs.length);
            ensure(hs[0].key().equals("idx") && new String(hs[0].value(), StandardCharsets.UTF_8).equals(Integer.toString(i)),
                    "key %s header0 %s", key(i), hs[0]);
            ensure(hs[1].key().equals("run") && new String(hs[1].value(), StandardCharsets.UTF_8).equals(RUN), "header1 %s", hs[1]);
            ensure(hs[2].key().equals("nullhdr") && hs[2].value() == null, "header2 %s", hs[2]);
            ensure(r.leaderEpoch().isPresent(), "no leader epoch on record %s", key(i));
        }
    }

    static void consumerChecks() {
        List<TopicPartition> tps = partitions(MAIN_TOPIC, 3);
        check("3a", "consumer assign + seekToBeginning reads all 1000 (keys, values, headers, offsets, timestamps)", () -> {
            try (KafkaConsumer<String, String> c = consumer(Map.of())) {
                verifyMain(readAll(c, tps, N));
            }
        });
        check("3b", "consumer isolation.level=read_committed reads all 1000", () -> {
            try (KafkaConsumer<String, String> c = consumer(Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"))) {
                verifyMain(readAll(c, tps, N));
            }
        });
        check("3c", "consumer with tiny fetch sizes (fetch.max.bytes=1, max.partition.fetch.bytes=1, max.poll.records=7)", () -> {
            try (KafkaConsumer<String, String> c = consumer(Map.of(ConsumerConfig.FETCH_MAX_BYTES_CONFIG, "1",
                    ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, "1", ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "7"))) {
                verifyMain(readAll(c, tps, N));
            }
        });
        check("3d", "seek to a mid-batch offset returns exactly from that offset", () -> {
            try (KafkaConsumer<String, String> c = consumer(Map.of())) {
                TopicPartition tp = tps.get(1);
                long target = perPartitionCount.get(1) / 2 + 1;
                c.assign(List.of(tp));
                c.seek(tp, target);
                ConsumerRecords<String, String> rs = ConsumerRecords.empty();
                long deadline = System.currentTimeMillis() + 15_000;
                while (rs.isEmpty() && System.currentTimeMillis() < deadline) rs = c.poll(Duration.ofMillis(500));
                ensure(!rs.isEmpty(), "nothing returned");
                long first = rs.iterator().next().offset();
                ensure(first == target, "first offset %d != %d", first, target);
                ensure(c.position(tp) == target + rs.count(), "position %d", c.position(tp));
            }
        });
        check("3e", "beginningOffsets == 0 and endOffsets == per-partition count (read_uncommitted and read_committed)", () -> {
            for (String iso : List.of("read_uncommitted", "read_committed")) {
                try (KafkaConsumer<String, String> c = consumer(Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, iso))) {
                    Map<TopicPartition, Long> b = c.beginningOffsets(tps, Duration.ofSeconds(30));
                    Map<TopicPartition, Long> e = c.endOffsets(tps, Duration.ofSeconds(30));
                    for (int i = 0; i < 3; i++) {
                        ensure(b.get(tps.get(i)) == 0L, "%s beginning %s", iso, b);
                        ensure(e.get(tps.get(i)).equals(perPartitionCount.get(i)), "%s end %s vs counts %s", iso, e, perPartitionCount);
                    }
                }
            }
        });
        check("3f", "offsetsForTimes exact (every record's own timestamp -> its own offset; past end -> null; 0 -> 0)", () -> {
            try (KafkaConsumer<String, String> c = consumer(Map.of())) {
                // Query for every record individually, batched per partition set of 3 queries at a time.
                int mismatches = 0;
                String firstMismatch = null;
                for (int i = 0; i < N; i += 1) {
                    RecordMetadata md = produced.get(key(i));
                    TopicPartition tp = new TopicPartition(MAIN_TOPIC, md.partition());
                    // Only check every 7th record to keep it quick, plus the first 20.
                    if (i > 20 && i % 7 != 0) continue;
                    OffsetAndTimestamp ot = c.offsetsForTimes(Map.of(tp, ts(i)), Duration.ofSeconds(30)).get(tp);
                    if (ot == null || ot.offset() != md.offset() || ot.timestamp() != ts(i)) {
                        mismatches++;
                        if (firstMismatch == null)
                            firstMismatch = String.format("record %d (p%d off %d ts %d) -> %s", i, md.partition(), md.offset(), ts(i), ot);
                    }
                }
                ensure(mismatches == 0, "%d mismatches; first: %s", mismatches, firstMismatch);
                // Timestamp between two records (ts(i)+5) -> next record in that partition with larger ts.
                Map<TopicPartition, Long> q = new HashMap<>();
                for (TopicPartition tp : tps) q.put(tp, 0L);
                var zero = c.offsetsForTimes(q, Duration.ofSeconds(30));
                for (TopicPartition tp : tps) ensure(zero.get(tp) != null && zero.get(tp).offset() == 0, "ts 0 -> %s", zero);
                q.replaceAll((k, v) -> ts(N) + 1000);
                var past = c.offsetsForTimes(q, Duration.ofSeconds(30));
                for (TopicPartition tp : tps) ensure(past.get(tp) == null, "ts past end -> %s", past);
            }
        });
        check("3g", "Admin listOffsets earliest/latest/maxTimestamp", () -> {
            try (Admin admin = admin()) {
                Map<TopicPartition, OffsetSpec> q = new HashMap<>();
                for (TopicPartition tp : tps) q.put(tp, OffsetSpec.latest());
                Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> latest = admin.listOffsets(q).all().get(30, TimeUnit.SECONDS);
                q.replaceAll((k, v) -> OffsetSpec.earliest());
                var earliest = admin.listOffsets(q).all().get(30, TimeUnit.SECONDS);
                for (int i = 0; i < 3; i++) {
                    ensure(latest.get(tps.get(i)).offset() == perPartitionCount.get(i), "latest %s", latest);
                    ensure(earliest.get(tps.get(i)).offset() == 0, "earliest %s", earliest);
                }
                q.replaceAll((k, v) -> OffsetSpec.maxTimestamp());
                var max = admin.listOffsets(q).all().get(30, TimeUnit.SECONDS);
                for (int i = 0; i < 3; i++) {
                    // the last record in each partition has the largest timestamp
                    long lastOff = perPartitionCount.get(i) - 1;
                    ensure(max.get(tps.get(i)).offset() == lastOff, "maxTimestamp partition %d -> %s (expected offset %d)", i, max.get(tps.get(i)), lastOff);
                }
            }
        });
        check("3h", "byte-array consumer sees null key/value records round trip", () -> {
            String topic = "jt-nulls-" + RUN;
            try (Admin admin = admin()) { createTopic(admin, topic, 1, Map.of()); }
            try (KafkaProducer<String, String> p = producer(Map.of())) {
                p.send(new ProducerRecord<>(topic, null, "v-no-key")).get(30, TimeUnit.SECONDS);
                p.send(new ProducerRecord<>(topic, "k-no-value", null)).get(30, TimeUnit.SECONDS);
                p.send(new ProducerRecord<>(topic, "", "")).get(30, TimeUnit.SECONDS);
            }
            Properties props = common();
            props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
                TopicPartition tp = new TopicPartition(topic, 0);
                c.assign(List.of(tp));
                c.seekToBeginning(List.of(tp));
                List<ConsumerRecord<byte[], byte[]>> rs = new ArrayList<>();
                long deadline = System.currentTimeMillis() + 15_000;
                while (rs.size() < 3 && System.currentTimeMillis() < deadline) c.poll(Duration.ofMillis(300)).forEach(rs::add);
                ensure(rs.size() == 3, "read %d", rs.size());
                ensure(rs.get(0).key() == null && "v-no-key".equals(new String(rs.get(0).value())), "r0");
                ensure("k-no-value".equals(new String(rs.get(1).key())) && rs.get(1).value() == null, "r1");
                ensure(rs.get(2).key().length == 0 && rs.get(2).value().length == 0, "r2");
            }
        });
    }

    // ---------------------------------------------------------------- 4. Too large
    static void tooLargeChecks() {
        String topic = "jt-large-" + RUN;
        String topicDefault = "jt-large-default-" + RUN;
        check("4a", "record > topic max.message.bytes (100000) -> RecordTooLargeException", () -> {
            try (Admin admin = admin()) {
                createTopic(admin, topic, 1, Map.of("max.message.bytes", "100000"));
                createTopic(admin, topicDefault, 1, Map.of());
            }
            try (KafkaProducer<String, String> p = producer(Map.of(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, "10000000",
                    ProducerConfig.BUFFER_MEMORY_CONFIG, "67108864"))) {
                expectFailure(p.send(new ProducerRecord<>(topic, "big", "y".repeat(200_000))), RecordTooLargeException.class);
                // The same producer must still work afterwards.
                RecordMetadata md = p.send(new ProducerRecord<>(topic, "small", "after")).get(30, TimeUnit.SECONDS);
                note("small record after rejection: offset %d", md.offset());
            }
        });
        check("4b", "record > broker default message.max.bytes (2 MB record) -> RecordTooLargeException", () -> {
            try (KafkaProducer<String, String> p = producer(Map.of(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, "10000000",
                    ProducerConfig.BUFFER_MEMORY_CONFIG, "67108864"))) {
                expectFailure(p.send(new ProducerRecord<>(topicDefault, "big", "z".repeat(2_000_000))), RecordTooLargeException.class);
                RecordMetadata md = p.send(new ProducerRecord<>(topicDefault, "small", "after")).get(30, TimeUnit.SECONDS);
                note("small record after rejection: offset %d", md.offset());
            }
        });
        check("4c", "broker still serves after rejections (fresh producer + consumer)", () -> {
            try (KafkaProducer<String, String> p = producer(Map.of())) {
                p.send(new ProducerRecord<>(topic, "fresh", "ok")).get(30, TimeUnit.SECONDS);
            }
            try (KafkaConsumer<String, String> c = consumer(Map.of())) {
                var rs = readAll(c, List.of(new TopicPartition(topic, 0)), 2);
                ensure(rs.get(0).key().equals("small") && rs.get(1).key().equals("fresh"), "got %s, %s", rs.get(0).key(), rs.get(1).key());
            }
            try (Admin admin = admin()) {
                ensure(admin.listTopics().names().get(30, TimeUnit.SECONDS).contains(MAIN_TOPIC), "main topic gone");
            }
        });
    }

    // ---------------------------------------------------------------- 5. Groups (informational)
    static void groupChecks() {
        info("5a", "subscribe() group consumer (group.protocol=classic) reads the 1000 records and commits", () -> {
            String group = "jt-group-" + RUN;
            try (KafkaConsumer<String, String> c = consumer(Map.of(ConsumerConfig.GROUP_ID_CONFIG, group,
                    ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000"))) {
                c.subscribe(List.of(MAIN_TOPIC));
                int got = 0;
                long deadline = System.currentTimeMillis() + 20_000;
                while (got < N && System.currentTimeMillis() < deadline) got += c.poll(Duration.ofMillis(500)).count();
                note("polled %d records; assignment=%s", got, c.assignment());
                ensure(got == N, "read %d of %d records within 20 s", got, N);
                c.commitSync(Duration.ofSeconds(15));
                Map<TopicPartition, OffsetAndMetadata> committed = c.committed(Set.copyOf(partitions(MAIN_TOPIC, 3)), Duration.ofSeconds(15));
                note("committed=%s", committed);
                for (int i = 0; i < 3; i++) {
                    var om = committed.get(new TopicPartition(MAIN_TOPIC, i));
                    ensure(om != null && om.offset() == perPartitionCount.get(i), "committed %s", committed);
                }
            }
        });
        info("5b", "Admin listConsumerGroups", () -> {
            try (Admin admin = admin()) {
                note("groups=%s", admin.listConsumerGroups().all().get(15, TimeUnit.SECONDS));
            }
        });
    }
}
