package logbook.it;

import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Many partitions, many clients (issue 24, item 5): TOPICS topics of PARTITIONS partitions
 * each, CONSUMERS Java consumers (each assigned an equal share of every partition, from the
 * end) and PRODUCERS Java producers (acks=all, linger 5 ms) writing RATE records/s in
 * total to random partitions. Reports, over a measured window after a warm-up: end-to-end
 * latency percentiles (the value carries the send time), the broker's CPU-seconds (exact,
 * from /proc/PID/task/*&#47;schedstat) and per GB, and then the broker's CPU at rest while
 * the consumers keep polling with no new records. The Java consumer uses incremental fetch
 * sessions (KIP-227) when the broker offers them; run it once with the broker's session
 * cache at 0 slots to see what they save.
 *
 * <pre>
 * java -cp ... logbook.it.ManyPartitions BOOTSTRAP BROKER_PID [TOPICS=100] [PARTITIONS=100]
 *      [CONSUMERS=20] [PRODUCERS=20] [RATE=5000] [SECONDS=30] [VALUE_BYTES=100] [IDLE_SECONDS=15]
 * </pre>
 */
public final class ManyPartitions {
    private ManyPartitions() {}

    static long brokerCpuNanos(long pid) throws Exception {
        long total = 0;
        try (var tasks = Files.list(Path.of("/proc/" + pid + "/task"))) {
            for (Path task : tasks.collect(Collectors.toList())) {
                try {
                    String s = Files.readString(task.resolve("schedstat")).trim();
                    total += Long.parseLong(s.split(" ")[0]);
                } catch (java.io.IOException gone) {
                    // a thread that exited between the listing and the read
                }
            }
        }
        return total;
    }

    static double pct(long[] sorted, double p) {
        if (sorted.length == 0) {
            return Double.NaN;
        }
        int i = (int) Math.min(sorted.length - 1, Math.ceil(p / 100.0 * sorted.length) - 1);
        return sorted[Math.max(0, i)] / 1000.0;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        long pid = Long.parseLong(args[1]);
        int topics = args.length > 2 ? Integer.parseInt(args[2]) : 100;
        int partitions = args.length > 3 ? Integer.parseInt(args[3]) : 100;
        int consumers = args.length > 4 ? Integer.parseInt(args[4]) : 20;
        int producers = args.length > 5 ? Integer.parseInt(args[5]) : 20;
        int rate = args.length > 6 ? Integer.parseInt(args[6]) : 5000;
        int seconds = args.length > 7 ? Integer.parseInt(args[7]) : 30;
        int valueBytes = args.length > 8 ? Integer.parseInt(args[8]) : 100;
        int idleSeconds = args.length > 9 ? Integer.parseInt(args[9]) : 15;
        String prefix = "many-" + topics + "x" + partitions + "-";

        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            Set<String> existing = admin.listTopics().names().get();
            List<NewTopic> missing = IntStream.range(0, topics)
                    .mapToObj(i -> prefix + i)
                    .filter(t -> !existing.contains(t))
                    .map(t -> new NewTopic(t, partitions, (short) 1))
                    .collect(Collectors.toList());
            // In tens of topics: Kafka's controller refuses one batch of 10,000 partitions.
            for (int i = 0; i < missing.size(); i += 10) {
                admin.createTopics(missing.subList(i, Math.min(missing.size(), i + 10))).all().get();
            }
            // Until every partition has a leader (Kafka elects them after CreateTopics answers).
            List<String> names = IntStream.range(0, topics).mapToObj(i -> prefix + i).collect(Collectors.toList());
            long deadline = System.nanoTime() + 120_000_000_000L;
            while (true) {
                long led;
                try {
                    led = admin.describeTopics(names).allTopicNames().get().values().stream()
                            .flatMap(d -> d.partitions().stream())
                            .filter(p -> p.leader() != null && !p.leader().isEmpty())
                            .count();
                } catch (java.util.concurrent.ExecutionException notYet) {
                    led = -1;
                }
                if (led == (long) topics * partitions || System.nanoTime() > deadline) {
                    System.out.printf("partitions with a leader: %d%n", led);
                    break;
                }
                Thread.sleep(1000);
            }
        }
        List<TopicPartition> all = new ArrayList<>();
        for (int t = 0; t < topics; t++) {
            for (int p = 0; p < partitions; p++) {
                all.add(new TopicPartition(prefix + t, p));
            }
        }

        AtomicBoolean running = new AtomicBoolean(true);
        AtomicBoolean measuring = new AtomicBoolean(false);
        AtomicBoolean producing = new AtomicBoolean(true);
        AtomicLong measuredBytes = new AtomicLong();
        ConcurrentLinkedQueue<long[]> latencies = new ConcurrentLinkedQueue<>();
        List<Thread> threads = new ArrayList<>();
        List<Integer> assignedCounts = new ArrayList<>();

        for (int c = 0; c < consumers; c++) {
            final int me = c;
            List<TopicPartition> mine = IntStream.range(0, all.size())
                    .filter(i -> i % consumers == me)
                    .mapToObj(all::get)
                    .collect(Collectors.toList());
            assignedCounts.add(mine.size());
            Thread th = new Thread(() -> {
                Properties cp = new Properties();
                cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
                cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
                cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
                try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp)) {
                    consumer.assign(mine);
                    consumer.seekToEnd(mine);
                    for (TopicPartition tp : mine) {
                        consumer.position(tp);
                    }
                    long[] buf = new long[4096];
                    int n = 0;
                    while (running.get()) {
                        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(java.time.Duration.ofMillis(200))) {
                            if (!measuring.get()) {
                                continue;
                            }
                            long sent = ByteBuffer.wrap(r.value()).getLong();
                            buf[n++] = (System.nanoTime() - sent) / 1000;
                            measuredBytes.addAndGet(r.value().length);
                            if (n == buf.length) {
                                latencies.add(buf);
                                buf = new long[4096];
                                n = 0;
                            }
                        }
                    }
                    latencies.add(Arrays.copyOf(buf, n));
                }
            }, "consumer-" + c);
            threads.add(th);
        }
        for (int p = 0; p < producers; p++) {
            Thread th = new Thread(() -> {
                Properties pp = new Properties();
                pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
                pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
                pp.put(ProducerConfig.ACKS_CONFIG, "all");
                pp.put(ProducerConfig.LINGER_MS_CONFIG, "5");
                double perThread = (double) rate / producers;
                long intervalNanos = (long) (1e9 / perThread);
                try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
                    long next = System.nanoTime();
                    while (producing.get()) {
                        long now = System.nanoTime();
                        if (now < next) {
                            java.util.concurrent.locks.LockSupport.parkNanos(next - now);
                            continue;
                        }
                        next += intervalNanos;
                        TopicPartition tp = all.get(ThreadLocalRandom.current().nextInt(all.size()));
                        byte[] value = new byte[valueBytes];
                        ByteBuffer.wrap(value).putLong(System.nanoTime());
                        producer.send(new ProducerRecord<>(tp.topic(), tp.partition(), null, value));
                    }
                }
            }, "producer-" + p);
            threads.add(th);
        }
        for (Thread th : threads) {
            th.start();
        }
        Thread.sleep(10_000);
        var os = (com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory.getOperatingSystemMXBean();
        long cpu0 = brokerCpuNanos(pid);
        long client0 = os.getProcessCpuTime();
        long t0 = System.nanoTime();
        measuring.set(true);
        Thread.sleep(seconds * 1000L);
        measuring.set(false);
        long cpu1 = brokerCpuNanos(pid);
        long client1 = os.getProcessCpuTime();
        double window = (System.nanoTime() - t0) / 1e9;
        producing.set(false);
        Thread.sleep(3_000);
        long idle0 = brokerCpuNanos(pid);
        long idleT0 = System.nanoTime();
        Thread.sleep(idleSeconds * 1000L);
        long idle1 = brokerCpuNanos(pid);
        double idleWindow = (System.nanoTime() - idleT0) / 1e9;
        running.set(false);
        for (Thread th : threads) {
            th.join(30_000);
        }
        long[] sorted = latencies.stream().flatMapToLong(Arrays::stream).sorted().toArray();
        double brokerCpu = (cpu1 - cpu0) / 1e9;
        double gb = measuredBytes.get() / 1e9;
        System.out.printf("partitions=%d consumers=%d producers=%d rate=%d value_bytes=%d window_s=%.1f%n",
                all.size(), consumers, producers, rate, valueBytes, window);
        System.out.printf("records=%d records_per_s=%.0f e2e_ms p50=%.2f p99=%.2f p99.9=%.2f max=%.2f%n",
                sorted.length, sorted.length / window, pct(sorted, 50), pct(sorted, 99), pct(sorted, 99.9),
                sorted.length == 0 ? Double.NaN : sorted[sorted.length - 1] / 1000.0);
        System.out.printf("broker_cpu_s=%.2f broker_cores=%.3f broker_cpu_s_per_gb=%.1f client_cores=%.2f%n",
                brokerCpu, brokerCpu / window, brokerCpu / Math.max(gb, 1e-9),
                (client1 - client0) / 1e9 / window);
        System.out.printf("at_rest broker_cores=%.4f (consumers polling, no records, %.0f s)%n",
                (idle1 - idle0) / 1e9 / idleWindow, idleWindow);
    }
}
