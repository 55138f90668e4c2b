"""Second client family: kafka-python against a Logbook broker.

Usage: smoke.py BOOTSTRAP

Creates topics with KafkaAdminClient, sends 100 keyed records with KafkaProducer
(API versions negotiated, not pinned), reads them back with a KafkaConsumer
assigned to the partition, and checks values, keys, headers and offsets.
Exits 1 with a message on the first mismatch; prints one summary line on success.
"""

import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

TIMEOUT_S = 20


def check(condition, message):
    if not condition:
        print("MISMATCH: " + message, file=sys.stderr)
        sys.exit(1)


def main():
    bootstrap = sys.argv[1]
    topic = "py-smoke"
    admin_topic = "py-admin-topic"

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="py-admin", request_timeout_ms=10000)
    admin.create_topics([
        NewTopic(name=topic, num_partitions=1, replication_factor=1),
        NewTopic(name=admin_topic, num_partitions=2, replication_factor=1),
    ])
    listed = set(admin.list_topics())
    check({topic, admin_topic} <= listed, "list_topics after create: %r" % sorted(listed))
    try:
        admin.create_topics([NewTopic(name=admin_topic, num_partitions=2, replication_factor=1)])
        check(False, "creating %s twice did not raise TopicAlreadyExistsError" % admin_topic)
    except TopicAlreadyExistsError:
        pass
    admin.close()

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        linger_ms=5,
        request_timeout_ms=10000,
        max_block_ms=TIMEOUT_S * 1000,
    )
    check(
        producer.partitions_for(admin_topic) == {0, 1},
        "partitions of %s: %r" % (admin_topic, producer.partitions_for(admin_topic)),
    )
    futures = [
        producer.send(
            topic,
            key=b"key-%03d" % i,
            value=b"value-%03d" % i,
            partition=0,
            headers=[("index", str(i).encode())],
            timestamp_ms=1_700_000_000_000 + i,
        )
        for i in range(100)
    ]
    metas = [f.get(timeout=TIMEOUT_S) for f in futures]
    producer.flush()
    producer.close()
    check([m.offset for m in metas] == list(range(100)), "acknowledged offsets %r" % [m.offset for m in metas])
    check(all(m.topic == topic and m.partition == 0 for m in metas), "acknowledged topic/partition")

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        request_timeout_ms=15000,
    )
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    records = []
    deadline = time.time() + TIMEOUT_S
    while len(records) < 100 and time.time() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            records.extend(batch)
    check(len(records) == 100, "consumed %d records, expected 100" % len(records))
    for i, record in enumerate(records):
        check(record.offset == i, "offset of record %d: %d" % (i, record.offset))
        check(record.key == b"key-%03d" % i, "key at offset %d: %r" % (i, record.key))
        check(record.value == b"value-%03d" % i, "value at offset %d: %r" % (i, record.value))
        check(list(record.headers) == [("index", str(i).encode())], "headers at offset %d: %r" % (i, record.headers))
        check(record.timestamp == 1_700_000_000_000 + i, "timestamp at offset %d: %r" % (i, record.timestamp))

    ends = consumer.end_offsets([tp])
    starts = consumer.beginning_offsets([tp])
    check(ends == {tp: 100}, "end_offsets %r" % ends)
    check(starts == {tp: 0}, "beginning_offsets %r" % starts)
    by_time = consumer.offsets_for_times({tp: 1_700_000_000_050})
    check(by_time[tp] is not None and by_time[tp].offset == 50, "offsets_for_times %r" % by_time)
    consumer.close()

    print("kafka-python smoke ok: produced=100 consumed=100 offsets=0..99 admin_topics=%s,%s" % (topic, admin_topic))


if __name__ == "__main__":
    main()
