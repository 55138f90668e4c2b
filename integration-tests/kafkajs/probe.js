// kafkajs compatibility probe for Logbook.
//   node probe.js HOST:PORT
// Steps: create topic, idempotent produce, group consume+commit, restart
// resumes at committed end, list offsets (earliest/latest/timestamp), delete.
// Client debug logging (API keys/versions of each request) goes to stderr.
'use strict';
const { Kafka, logLevel } = require('kafkajs');

const bootstrap = process.argv[2] || '127.0.0.1:9092';
const N = 300, P = 3;
const suffix = `${Date.now()}-${Math.floor(Math.random() * 1e6)}`;
const topic = `probe-kafkajs-${suffix}`;
const groupId = `g-kafkajs-${suffix}`;
const BASE_TS = Date.now() - 1_000_000; // record i has timestamp BASE_TS + i*1000

// record i -> partition i % 3, offset floor(i / 3)
const key = (i) => `key-${i}`;
const value = (i) => `value-${i}-${'x'.repeat(i % 17)}`;
const perPart = (p) => Math.floor((N - p + P - 1) / P);

const logCreator = () => ({ namespace, level, label, log }) => {
  const { message, ...extra } = log;
  process.stderr.write(`${new Date().toISOString()} ${label} [${namespace}] ${message} ${JSON.stringify(extra)}\n`);
};
const kafka = new Kafka({
  clientId: 'logbook-probe-kafkajs',
  brokers: [bootstrap],
  logLevel: logLevel.DEBUG,
  logCreator,
  retry: { retries: 3, initialRetryTime: 200 },
  connectionTimeout: 3000,
  requestTimeout: 10000,
});

let passed = 0, failed = 0;
const failures = [];
function withTimeout(p, ms, what) {
  let t;
  return Promise.race([p, new Promise((_, rej) => { t = setTimeout(() => rej(new Error(`timeout after ${ms} ms: ${what}`)), ms); })])
    .finally(() => clearTimeout(t));
}
async function step(name, fn, ms = 20000) {
  const t0 = Date.now();
  try {
    await withTimeout(fn(), ms, name);
    passed++;
    console.log(`PASS ${name} (${Date.now() - t0} ms)`);
    return true;
  } catch (e) {
    failed++;
    const detail = e && (e.stack || String(e));
    const extra = e ? JSON.stringify({ name: e.name, type: e.type, code: e.code, retriable: e.retriable, originalError: e.originalError && String(e.originalError) }) : '';
    console.log(`FAIL ${name} (${Date.now() - t0} ms): ${detail}\n     ${extra}`);
    process.stderr.write(`#### FAIL ${name}: ${detail}\n`);
    failures.push(name);
    return false;
  }
}
function assert(cond, msg) { if (!cond) throw new Error(`assertion failed: ${msg}`); }
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  console.log(`kafkajs probe: bootstrap=${bootstrap} topic=${topic} group=${groupId}`);
  const admin = kafka.admin();
  await admin.connect();

  await step('1 create topic (3 partitions)', async () => {
    const created = await admin.createTopics({ topics: [{ topic, numPartitions: P, replicationFactor: 1 }], waitForLeaders: true });
    assert(created === true, `createTopics returned ${created}`);
    const md = await admin.fetchTopicMetadata({ topics: [topic] });
    const parts = md.topics[0].partitions;
    assert(parts.length === P, `metadata shows ${parts.length} partitions`);
  });

  await step('2 produce 300 keyed records with header (idempotent)', async () => {
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
    await producer.connect();
    try {
      const counts = [0, 0, 0];
      for (let b = 0; b < 3; b++) {
        const msgs = [];
        for (let i = b * 100; i < (b + 1) * 100; i++) {
          msgs.push({ key: key(i), value: value(i), partition: i % P, timestamp: String(BASE_TS + i * 1000), headers: { 'probe-idx': String(i), 'probe-client': 'kafkajs' } });
        }
        const res = await producer.send({ topic, messages: msgs, acks: -1 });
        assert(res.length === P, `send returned ${res.length} partition results: ${JSON.stringify(res)}`);
        for (const r of res) {
          assert(r.errorCode === 0, `partition ${r.partition} errorCode ${r.errorCode}`);
          assert(Number(r.baseOffset) === counts[r.partition], `batch ${b} partition ${r.partition} baseOffset ${r.baseOffset}, expected ${counts[r.partition]}`);
        }
        for (let i = b * 100; i < (b + 1) * 100; i++) counts[i % P]++;
      }
    } finally {
      await producer.disconnect();
    }
  });

  const consumed = new Map(); // partition -> [{offset,key,value,headers}]
  const runConsumer = async (expect, idleMs) => {
    const got = [];
    const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 1000, rebalanceTimeout: 10000, allowAutoTopicCreation: false, maxWaitTimeInMs: 500 });
    let joined = false;
    consumer.on(consumer.events.GROUP_JOIN, (e) => { joined = true; console.log(`     group join: ${JSON.stringify(e.payload.memberAssignment)}`); });
    await consumer.connect();
    try {
      await consumer.subscribe({ topics: [topic], fromBeginning: true });
      await consumer.run({
        autoCommit: false,
        eachMessage: async ({ partition, message }) => { got.push({ partition, message }); },
      });
      const t0 = Date.now();
      while (Date.now() - t0 < 25000) {
        if (expect > 0 && got.length >= expect) break;
        if (expect === 0 && joined) break;
        await sleep(100);
      }
      assert(joined, 'consumer never joined the group');
      await sleep(idleMs); // catch duplicates / extra records
      if (expect > 0) {
        const last = [-1, -1, -1];
        for (const { partition, message } of got) last[partition] = Math.max(last[partition], Number(message.offset));
        const offs = [];
        for (let p = 0; p < P; p++) if (last[p] >= 0) offs.push({ topic, partition: p, offset: String(last[p] + 1) });
        await consumer.commitOffsets(offs);
      }
    } finally {
      await consumer.disconnect();
    }
    return got;
  };

  await step('3 group consume 300, check key/value/header/offset, commit', async () => {
    const got = await runConsumer(N, 1500);
    assert(got.length === N, `received ${got.length} records, expected ${N}`);
    for (const { partition, message } of got) {
      if (!consumed.has(partition)) consumed.set(partition, []);
      consumed.get(partition).push(message);
    }
    for (let p = 0; p < P; p++) {
      const msgs = consumed.get(p) || [];
      assert(msgs.length === perPart(p), `partition ${p}: ${msgs.length} records, expected ${perPart(p)}`);
      msgs.forEach((m, j) => {
        const i = j * P + p;
        assert(Number(m.offset) === j, `p${p} record #${j} offset ${m.offset}`);
        assert(m.key.toString() === key(i), `p${p}@${j} key ${m.key}`);
        assert(m.value.toString() === value(i), `p${p}@${j} value ${m.value}`);
        assert(m.headers && m.headers['probe-idx'] && m.headers['probe-idx'].toString() === String(i), `p${p}@${j} header probe-idx ${JSON.stringify(m.headers)}`);
        assert(m.headers['probe-client'] && m.headers['probe-client'].toString() === 'kafkajs', `p${p}@${j} header probe-client`);
        assert(Number(m.timestamp) === BASE_TS + i * 1000, `p${p}@${j} timestamp ${m.timestamp} expected ${BASE_TS + i * 1000}`);
      });
    }
    const committed = await admin.fetchOffsets({ groupId, topics: [topic] });
    const parts = committed[0].partitions.sort((a, b) => a.partition - b.partition);
    for (let p = 0; p < P; p++) assert(Number(parts[p].offset) === perPart(p), `committed offset p${p} = ${parts[p].offset}`);
  }, 45000);

  await step('4 restart consumer in same group receives nothing more', async () => {
    const got = await runConsumer(0, 3000);
    assert(got.length === 0, `received ${got.length} records after restart: first at p${got[0] && got[0].partition}@${got[0] && got[0].message.offset}`);
  }, 45000);

  await step('5 list offsets earliest/latest/by timestamp', async () => {
    const offs = (await admin.fetchTopicOffsets(topic)).sort((a, b) => a.partition - b.partition);
    assert(offs.length === P, `fetchTopicOffsets returned ${offs.length}`);
    for (let p = 0; p < P; p++) {
      assert(Number(offs[p].low) === 0, `p${p} earliest ${offs[p].low}`);
      assert(Number(offs[p].high) === perPart(p), `p${p} latest ${offs[p].high}`);
    }
    // first record with index >= 151: p0 -> 153 (offset 51), p1 -> 151 (50), p2 -> 152 (50)
    const byTs = (await admin.fetchTopicOffsetsByTimestamp(topic, BASE_TS + 151 * 1000)).sort((a, b) => a.partition - b.partition);
    const want = [51, 50, 50];
    for (let p = 0; p < P; p++) assert(Number(byTs[p].offset) === want[p], `p${p} offset for ts ${BASE_TS + 151000} = ${byTs[p].offset}, expected ${want[p]}`);
    const byTs0 = (await admin.fetchTopicOffsetsByTimestamp(topic, BASE_TS - 5000)).sort((a, b) => a.partition - b.partition);
    for (let p = 0; p < P; p++) assert(Number(byTs0[p].offset) === 0, `p${p} offset for ts before all = ${byTs0[p].offset}`);
  });

  await step('6 delete topic', async () => {
    await admin.deleteTopics({ topics: [topic], timeout: 5000 });
    let topics = [];
    for (let k = 0; k < 20; k++) {
      topics = await admin.listTopics();
      if (!topics.includes(topic)) break;
      await sleep(250);
    }
    assert(!topics.includes(topic), 'topic still listed after delete');
  });

  await admin.disconnect();
}

main()
  .catch((e) => { failed++; console.log(`FAIL setup: ${e.stack || e}`); })
  .finally(() => {
    console.log(`${passed} passed, ${failed} failed`);
    process.exit(failed ? 1 : 0);
  });
