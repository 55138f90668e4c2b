package logbook.it.streams;

import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Leaves a transaction open on partition 0 of a topic, as a producer that dies mid-transaction does: 3 records in
 * a transaction (transaction.timeout.ms 10 minutes, so the coordinator does not abort it during a test), then 2
 * records from a plain producer after it, then prints "open" and sleeps until killed. The records after the
 * transaction are held back from read_committed consumers by the open transaction (the last stable offset stays
 * at its first record) until it is aborted, e.g. by `kafka-transactions.sh abort` (scripts/txn-tools-test).
 *
 * <p>Usage: HangingTransaction BOOTSTRAP TOPIC TRANSACTIONAL_ID
 */
public final class HangingTransaction {
    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: HangingTransaction BOOTSTRAP TOPIC TRANSACTIONAL_ID");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, args[2]);
        props.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 600_000);
        KafkaProducer<String, String> transactional =
                new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
        transactional.initTransactions();
        transactional.beginTransaction();
        for (int i = 0; i < 3; i++) {
            transactional.send(new ProducerRecord<>(args[1], 0, "k" + i, "in-transaction-" + i)).get();
        }
        Properties plainProps = new Properties();
        plainProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        try (KafkaProducer<String, String> plain =
                new KafkaProducer<>(plainProps, new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < 2; i++) {
                plain.send(new ProducerRecord<>(args[1], 0, "p" + i, "after-" + i)).get();
            }
        }
        System.out.println("open");
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
