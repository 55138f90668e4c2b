"""kafka-python group consumer against a Logbook broker.

Usage: groups.py BOOTSTRAP

Produces 50 records to a one-partition topic, reads 30 with a group consumer, commits
offset 30 with a metadata string, closes, and checks that a second consumer of the same
group resumes at offset 30 and reads 30..49. Exits 1 with a message on the first
mismatch; prints one summary line on success.
"""

import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata

TIMEOUT_S = 40
TOPIC = "py-groups"
GROUP = "py-g"


def check(condition, message):
    if not condition:
        print("MISMATCH: " + message, file=sys.stderr)
        sys.exit(1)


def consumer(bootstrap, reset):
    return KafkaConsumer(
        TOPIC,
        bootstrap_servers=bootstrap,
        group_id=GROUP,
        enable_auto_commit=False,
        auto_offset_reset=reset,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        max_poll_records=10,
    )


def read(c, count):
    out = []
    deadline = time.time() + TIMEOUT_S
    while len(out) < count and time.time() < deadline:
        for records in c.poll(timeout_ms=200, max_records=count - len(out)).values():
            out.extend(records)
    check(len(out) == count, "read %d of %d records" % (len(out), count))
    return out


def main():
    bootstrap = sys.argv[1]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(TOPIC, 1, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(50):
        producer.send(TOPIC, key=b"k%d" % i, value=b"v%d" % i, partition=0)
    producer.flush()
    producer.close()

    tp = TopicPartition(TOPIC, 0)
    first = consumer(bootstrap, "earliest")
    got = read(first, 30)
    check([r.offset for r in got] == list(range(30)), "first offsets %r" % [r.offset for r in got])
    first.commit({tp: OffsetAndMetadata(30, "py-meta", -1)})
    committed = first.committed(tp, metadata=True)
    check(committed.offset == 30, "committed %r" % (committed,))
    check(committed.metadata == "py-meta", "metadata %r" % (committed,))
    first.close()

    second = consumer(bootstrap, "none")
    rest = read(second, 20)
    offsets = [r.offset for r in rest]
    check(offsets == list(range(30, 50)), "resumed offsets %r" % offsets)
    check(rest[0].value == b"v30", "value at 30 %r" % rest[0].value)
    second.close()
    print(
        "kafka-python groups ok: first=0..29 committed=%d meta=%s resumed=%d..%d"
        % (committed.offset, committed.metadata, offsets[0], offsets[-1])
    )


if __name__ == "__main__":
    main()
