"""aiokafka compatibility probe for Logbook.

    python aiokafka_probe.py HOST:PORT

Steps: create topic, idempotent produce, group consume+commit, restart resumes
at committed end, list offsets (earliest/latest/timestamp), delete.
aiokafka debug logging (every request sent, with its class name and version)
goes to stderr.
"""
import asyncio
import logging
import random
import sys
import time
import traceback

import aiokafka
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

BOOTSTRAP = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:9092"
N, P = 300, 3
SUFFIX = f"{int(time.time() * 1000)}-{random.randrange(1_000_000)}"
TOPIC = f"probe-aiokafka-{SUFFIX}"
GROUP = f"g-aiokafka-{SUFFIX}"
BASE_TS = int(time.time() * 1000) - 1_000_000  # record i: BASE_TS + i*1000
CLIENT_ID = "logbook-probe-aiokafka"

logging.basicConfig(stream=sys.stderr, level=logging.DEBUG, format="%(asctime)s %(levelname)s %(name)s %(message)s")
log = logging.getLogger("probe")


def key(i):
    return f"key-{i}".encode()


def value(i):
    return f"value-{i}-{'x' * (i % 17)}".encode()


def per_part(p):
    return (N - p + P - 1) // P


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


passed = failed = 0


async def step(name, coro_fn, timeout=20):
    global passed, failed
    t0 = time.time()
    try:
        await asyncio.wait_for(coro_fn(), timeout)
        passed += 1
        print(f"PASS {name} ({int((time.time() - t0) * 1000)} ms)", flush=True)
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        failed += 1
        print(f"FAIL {name} ({int((time.time() - t0) * 1000)} ms): {type(e).__module__}.{type(e).__name__}: {e!r}", flush=True)
        log.error("#### FAIL %s: %s", name, traceback.format_exc())


async def main():
    print(f"aiokafka probe: version={aiokafka.__version__} bootstrap={BOOTSTRAP} topic={TOPIC} group={GROUP}", flush=True)
    admin = AIOKafkaAdminClient(bootstrap_servers=BOOTSTRAP, client_id=CLIENT_ID, request_timeout_ms=10000)
    await admin.start()

    async def create():
        r = await admin.create_topics([NewTopic(TOPIC, num_partitions=P, replication_factor=1)], timeout_ms=10000)
        for t in getattr(r, "topic_errors", getattr(r, "topics", [])):
            check(t[1] == 0, f"CreateTopics error {t}")
        parts = None
        for _ in range(20):
            md = await admin.describe_topics([TOPIC])
            parts = md[0].get("partitions") if md else None
            if md and md[0].get("error_code") == 0 and parts and len(parts) == P:
                return
            await asyncio.sleep(0.2)
        raise AssertionError(f"describe_topics: {md}")

    async def produce():
        prod = AIOKafkaProducer(bootstrap_servers=BOOTSTRAP, client_id=CLIENT_ID, enable_idempotence=True, acks="all", linger_ms=5)
        await prod.start()
        try:
            for b in range(3):
                futs = []
                for i in range(b * 100, (b + 1) * 100):
                    futs.append(await prod.send(TOPIC, value=value(i), key=key(i), partition=i % P, timestamp_ms=BASE_TS + i * 1000,
                                                headers=[("probe-idx", str(i).encode()), ("probe-client", b"aiokafka")]))
                mds = await asyncio.gather(*futs)
                for i, md in zip(range(b * 100, (b + 1) * 100), mds):
                    check((md.partition, md.offset) == (i % P, i // P), f"record {i} at p{md.partition}@{md.offset}")
        finally:
            await prod.stop()

    async def run_consumer(expect, idle_s):
        cons = AIOKafkaConsumer(TOPIC, bootstrap_servers=BOOTSTRAP, client_id=CLIENT_ID, group_id=GROUP,
                                auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=10000,
                                heartbeat_interval_ms=1000, fetch_max_wait_ms=500)
        await cons.start()
        got = []
        try:
            deadline = time.time() + 30
            idle_until = None
            while time.time() < deadline:
                if idle_until is None and ((expect and len(got) >= expect) or (not expect and cons.assignment())):
                    print(f"     assigned: {sorted((tp.topic, tp.partition) for tp in cons.assignment())}", flush=True)
                    idle_until = time.time() + idle_s
                if idle_until is not None and time.time() > idle_until:
                    break
                batch = await cons.getmany(timeout_ms=200)
                for tp, msgs in batch.items():
                    got.extend(msgs)
            check(cons.assignment(), "never assigned")
            committed = None
            if got:
                await cons.commit()
                committed = {p: await cons.committed(TopicPartition(TOPIC, p)) for p in range(P)}
            return got, committed
        finally:
            await cons.stop()

    async def consume():
        got, committed = await run_consumer(N, 1.5)
        check(len(got) == N, f"received {len(got)} records")
        by_part = {}
        for m in got:
            by_part.setdefault(m.partition, []).append(m)
        for p in range(P):
            ms = by_part.get(p, [])
            check(len(ms) == per_part(p), f"p{p}: {len(ms)} records")
            for j, m in enumerate(ms):
                i = j * P + p
                check(m.offset == j, f"p{p} record #{j} offset {m.offset}")
                check(m.key == key(i) and m.value == value(i), f"p{p}@{j} key/value {m.key!r}/{m.value!r}")
                check(list(m.headers) == [("probe-idx", str(i).encode()), ("probe-client", b"aiokafka")], f"p{p}@{j} headers {m.headers}")
                check(m.timestamp == BASE_TS + i * 1000, f"p{p}@{j} timestamp {m.timestamp}")
        check(committed == {p: per_part(p) for p in range(P)}, f"committed {committed}")
        offs = await admin.list_consumer_group_offsets(GROUP)
        got_offs = {tp.partition: om.offset for tp, om in offs.items() if tp.topic == TOPIC}
        check(got_offs == {p: per_part(p) for p in range(P)}, f"admin list_consumer_group_offsets {offs}")

    async def restart():
        got, _ = await run_consumer(0, 3.0)
        check(not got, f"received {len(got)} records after restart, first p{got and got[0].partition}@{got and got[0].offset}")

    async def list_offsets():
        cons = AIOKafkaConsumer(bootstrap_servers=BOOTSTRAP, client_id=CLIENT_ID)
        await cons.start()
        try:
            tps = [TopicPartition(TOPIC, p) for p in range(P)]
            b = await cons.beginning_offsets(tps)
            check({tp.partition: o for tp, o in b.items()} == {0: 0, 1: 0, 2: 0}, f"beginning_offsets {b}")
            e = await cons.end_offsets(tps)
            check({tp.partition: o for tp, o in e.items()} == {p: per_part(p) for p in range(P)}, f"end_offsets {e}")
            t = await cons.offsets_for_times({tp: BASE_TS + 151 * 1000 for tp in tps})
            check({tp.partition: (ot.offset if ot else None) for tp, ot in t.items()} == {0: 51, 1: 50, 2: 50}, f"offsets_for_times {t}")
            t2 = await cons.offsets_for_times({tp: BASE_TS + 10_000_000 for tp in tps})
            check(all(ot is None for ot in t2.values()), f"offsets_for_times past all records {t2}")
        finally:
            await cons.stop()

    async def delete():
        await admin.delete_topics([TOPIC], timeout_ms=10000)
        for _ in range(20):
            if TOPIC not in await admin.list_topics():
                return
            await asyncio.sleep(0.25)
        raise AssertionError("topic still listed after delete")

    await step("1 create topic (3 partitions)", create)
    await step("2 produce 300 keyed records with header (idempotent)", produce)
    await step("3 group consume 300, check key/value/header/offset, commit", consume, 45)
    await step("4 restart consumer in same group receives nothing more", restart, 45)
    await step("5 list offsets earliest/latest/by timestamp", list_offsets)
    await step("6 delete topic", delete)
    await admin.close()


try:
    asyncio.run(main())
except Exception as e:  # noqa: BLE001
    failed += 1
    print(f"FAIL setup: {e!r}", flush=True)
print(f"{passed} passed, {failed} failed", flush=True)
sys.exit(1 if failed else 0)
