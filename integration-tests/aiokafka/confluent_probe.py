"""confluent-kafka-python (librdkafka) compatibility probe for Logbook.

    python confluent_probe.py HOST:PORT

Steps: create topic, idempotent produce, group consume+commit, restart resumes
at committed end, list offsets (earliest/latest/timestamp), delete.
librdkafka debug logging (protocol: every request with its ApiVersion) goes to
stderr.
"""
import logging
import random
import sys
import time

import confluent_kafka
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

BOOTSTRAP = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:9092"
N, P = 300, 3
SUFFIX = f"{int(time.time() * 1000)}-{random.randrange(1_000_000)}"
TOPIC = f"probe-confluent-{SUFFIX}"
GROUP = f"g-confluent-{SUFFIX}"
BASE_TS = int(time.time() * 1000) - 1_000_000  # record i: BASE_TS + i*1000
DEBUG = "protocol,broker,cgrp,eos,topic,consumer,admin,msg"

logging.basicConfig(stream=sys.stderr, level=logging.DEBUG, format="%(asctime)s %(name)s %(message)s")
rdlog = logging.getLogger("librdkafka")


def key(i):
    return f"key-{i}".encode()


def value(i):
    return f"value-{i}-{'x' * (i % 17)}".encode()


def per_part(p):
    return (N - p + P - 1) // P


def conf(**extra):
    c = {"bootstrap.servers": BOOTSTRAP, "client.id": "logbook-probe-confluent", "debug": DEBUG, "logger": rdlog}
    c.update(extra)
    return c


passed = failed = 0


def step(name, fn):
    global passed, failed
    t0 = time.time()
    try:
        fn()
        passed += 1
        print(f"PASS {name} ({int((time.time() - t0) * 1000)} ms)", flush=True)
    except Exception as e:  # noqa: BLE001
        failed += 1
        print(f"FAIL {name} ({int((time.time() - t0) * 1000)} ms): {type(e).__name__}: {e!r}", flush=True)
        rdlog.error("#### FAIL %s: %r", name, e)


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


admin = AdminClient(conf())


def create():
    fs = admin.create_topics([NewTopic(TOPIC, num_partitions=P, replication_factor=1)], operation_timeout=10)
    fs[TOPIC].result(timeout=15)
    md = admin.list_topics(topic=TOPIC, timeout=10)
    t = md.topics.get(TOPIC)
    check(t is not None and t.error is None and len(t.partitions) == P, f"metadata: {t and (t.error, list(t.partitions))}")


def produce():
    p = Producer(conf(**{"enable.idempotence": True, "acks": "all", "linger.ms": 5}))
    results = {}
    errors = []

    def dr(err, msg):
        if err is not None:
            errors.append((msg.key(), err))
        else:
            results[msg.key()] = (msg.partition(), msg.offset())

    for i in range(N):
        p.produce(TOPIC, key=key(i), value=value(i), partition=i % P, timestamp=BASE_TS + i * 1000,
                  headers=[("probe-idx", str(i).encode()), ("probe-client", b"confluent-kafka")], on_delivery=dr)
        if i % 100 == 99:
            left = p.flush(15)
            check(left == 0, f"{left} messages undelivered after flush")
    check(not errors, f"delivery errors: {errors[:3]}")
    check(len(results) == N, f"{len(results)} delivery reports")
    for i in range(N):
        check(results[key(i)] == (i % P, i // P), f"record {i} at {results[key(i)]}, expected {(i % P, i // P)}")


def run_consumer(expect, idle_s):
    assigned = []
    c = Consumer(conf(**{"group.id": GROUP, "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000, "fetch.wait.max.ms": 500}))

    def on_assign(consumer, parts):
        print(f"     assigned: {[(tp.topic, tp.partition, tp.offset) for tp in parts]}", flush=True)
        assigned.extend(parts)

    got = []
    try:
        c.subscribe([TOPIC], on_assign=on_assign)
        deadline = time.time() + 30
        idle_until = None
        while time.time() < deadline:
            if idle_until is None and ((expect and len(got) >= expect) or (not expect and assigned)):
                idle_until = time.time() + idle_s
            if idle_until is not None and time.time() > idle_until:
                break
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                raise KafkaException(m.error())
            got.append(m)
        check(assigned, "never assigned")
        if got:
            c.commit(asynchronous=False)
            committed = c.committed([TopicPartition(TOPIC, p) for p in range(P)], timeout=10)
            return got, committed
        return got, None
    finally:
        c.close()


def consume():
    got, committed = run_consumer(N, 1.5)
    check(len(got) == N, f"received {len(got)} records")
    by_part = {}
    for m in got:
        by_part.setdefault(m.partition(), []).append(m)
    for p in range(P):
        ms = by_part.get(p, [])
        check(len(ms) == per_part(p), f"p{p}: {len(ms)} records")
        for j, m in enumerate(ms):
            i = j * P + p
            check(m.offset() == j, f"p{p} record #{j} offset {m.offset()}")
            check(m.key() == key(i) and m.value() == value(i), f"p{p}@{j} key/value {m.key()!r}/{m.value()!r}")
            check(m.headers() == [("probe-idx", str(i).encode()), ("probe-client", b"confluent-kafka")], f"p{p}@{j} headers {m.headers()}")
            check(m.timestamp()[1] == BASE_TS + i * 1000, f"p{p}@{j} timestamp {m.timestamp()}")
    for tp in committed:
        check(tp.error is None and tp.offset == per_part(tp.partition), f"committed {tp}")
    # and as seen by the admin API (OffsetFetch from the admin client)
    from confluent_kafka import ConsumerGroupTopicPartitions
    f = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)])
    res = f[GROUP].result(timeout=10)
    offs = {tp.partition: tp.offset for tp in res.topic_partitions if tp.topic == TOPIC}
    check(offs == {p: per_part(p) for p in range(P)}, f"admin list_consumer_group_offsets: {offs}")


def restart():
    got, _ = run_consumer(0, 3.0)
    check(not got, f"received {len(got)} records after restart, first p{got and got[0].partition()}@{got and got[0].offset()}")


def list_offsets():
    # consumer API: get_watermark_offsets (ListOffsets earliest/latest), offsets_for_times
    c = Consumer(conf(**{"group.id": GROUP + "-lo"}))
    try:
        for p in range(P):
            lo, hi = c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10, cached=False)
            check((lo, hi) == (0, per_part(p)), f"watermarks p{p} = {(lo, hi)}")
        want = [51, 50, 50]  # first record with index >= 151
        r = c.offsets_for_times([TopicPartition(TOPIC, p, BASE_TS + 151 * 1000) for p in range(P)], timeout=10)
        check([tp.offset for tp in r] == want and all(tp.error is None for tp in r), f"offsets_for_times: {r}")
    finally:
        c.close()
    # admin API list_offsets
    for spec, want in ((OffsetSpec.earliest(), [0, 0, 0]), (OffsetSpec.latest(), [per_part(p) for p in range(P)]),
                       (OffsetSpec.for_timestamp(BASE_TS + 151 * 1000), [51, 50, 50])):
        fs = admin.list_offsets({TopicPartition(TOPIC, p): spec for p in range(P)}, request_timeout=10)
        got = [fs[tp].result(timeout=10).offset for tp in sorted(fs, key=lambda tp: tp.partition)]
        check(got == want, f"admin list_offsets {spec}: {got}, expected {want}")


def delete():
    fs = admin.delete_topics([TOPIC], operation_timeout=10)
    fs[TOPIC].result(timeout=15)
    for _ in range(20):
        if TOPIC not in admin.list_topics(timeout=10).topics:
            return
        time.sleep(0.25)
    raise AssertionError("topic still listed after delete")


print(f"confluent-kafka probe: version={confluent_kafka.version()} librdkafka={confluent_kafka.libversion()} "
      f"bootstrap={BOOTSTRAP} topic={TOPIC} group={GROUP}", flush=True)
step("1 create topic (3 partitions)", create)
step("2 produce 300 keyed records with header (idempotent)", produce)
step("3 group consume 300, check key/value/header/offset, commit", consume)
step("4 restart consumer in same group receives nothing more", restart)
step("5 list offsets earliest/latest/by timestamp", list_offsets)
step("6 delete topic", delete)
print(f"{passed} passed, {failed} failed", flush=True)
sys.exit(1 if failed else 0)
