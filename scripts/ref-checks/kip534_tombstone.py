# KIP-534 check, run the same against Logbook and against ../shared/reference-kafka:
#   PYTHONPATH=target/pydeps python3 scripts/ref-checks/kip534_tombstone.py 127.0.0.1:PORT
# A tombstone with a week-old timestamp must survive the first clean that removes its
# key's value, and go delete.retention.ms (8 s) after it.
import sys, time
from kafka import KafkaProducer, KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
bootstrap = sys.argv[1]
topic = "old-tombstones"
retention_ms = 8000
admin = KafkaAdminClient(bootstrap_servers=bootstrap)
admin.create_topics([NewTopic(topic, 1, 1, topic_configs={
    "cleanup.policy": "compact", "segment.ms": "500", "delete.retention.ms": str(retention_ms),
    "min.cleanable.dirty.ratio": "0.01"})])
time.sleep(1)
p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
week_ago = int(time.time() * 1000) - 7 * 86400000
p.send(topic, key=b"deleted", value=b"value", timestamp_ms=week_ago, partition=0).get()
p.send(topic, key=b"deleted", value=None, timestamp_ms=week_ago, partition=0).get()
def read_all():
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=1500)
    tp = TopicPartition(topic, 0)
    c.assign([tp]); c.seek_to_beginning(tp)
    out = [(m.offset, m.key, m.value, m.timestamp) for m in c]
    c.close()
    return out
start = time.time()
i = 0
first_clean = None
while time.time() - start < 120:
    p.send(topic, key=b"filler-%d" % i, value=b"f", partition=0).get(); i += 1
    time.sleep(0.3)
    recs = read_all()
    if first_clean is None and recs and recs[0][0] != 0:
        first_clean = time.time()
        print("first clean at %.1fs: head %s" % (first_clean - start, recs[:2]), flush=True)
    if first_clean is not None and not any(r[1] == b"deleted" for r in recs):
        print("tombstone gone %.1fs after the first clean" % (time.time() - first_clean), flush=True)
        break
