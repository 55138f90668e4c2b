// Drives kafkajs's transactional producer against a broker and checks, with exact counts, that
// committed transactions are read by read_committed consumers and aborted ones only by
// read_uncommitted ones, and that offsets sent to a transaction are committed with it.
// Prints one line per check and "N passed, N failed"; exits 1 if any failed.
// Run by scripts/clients-txn-test: node txn.js HOST:PORT (next to probe.js, same package.json)
'use strict';
const { Kafka, logLevel } = require('kafkajs');

const bootstrap = process.argv[2];
const kafka = new Kafka({ brokers: [bootstrap], logLevel: logLevel.NOTHING });
let passed = 0;
let failed = 0;
function check(ok, what) {
  if (ok) passed++; else failed++;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
}

// Values of `topic` as a consumer group member with the isolation level sees them within 6 s.
async function readAll(topic, readUncommitted) {
  const consumer = kafka.consumer({ groupId: `node-reader-${readUncommitted}-${topic}`, readUncommitted });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const values = [];
  await consumer.run({ eachMessage: async ({ message }) => { values.push(message.value.toString()); } });
  await new Promise((resolve) => setTimeout(resolve, 6000));
  await consumer.disconnect();
  return values;
}

(async () => {
  const topic = `node-txn-${Date.now()}`;
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 3 }, { topic: `${topic}-out`, numPartitions: 1 }] });
  const producer = kafka.producer({ transactionalId: `node-${topic}`, maxInFlightRequests: 1, idempotent: true });
  await producer.connect();
  for (const [round, commit] of [[0, true], [1, false], [2, true]]) {
    const txn = await producer.transaction();
    for (let i = 0; i < 10; i++) {
      await txn.send({ topic, messages: [{ value: `r${round}-${i}`, partition: i % 3 }] });
    }
    if (commit) await txn.commit(); else await txn.abort();
  }
  // Consume-transform-produce, the kafkajs way: output records and the group's offsets in one
  // transaction.
  const group = `node-group-${topic}`;
  const txn = await producer.transaction();
  await txn.send({ topic: `${topic}-out`, messages: [{ value: 'out' }] });
  await txn.sendOffsets({ consumerGroupId: group, topics: [{ topic, partitions: [{ partition: 0, offset: '5' }] }] });
  await txn.commit();
  await producer.disconnect();

  const committed = await readAll(topic, false);
  check(committed.length === 20, `read_committed sees the 2 committed transactions: ${committed.length} records (want 20)`);
  check(!committed.some((v) => v.startsWith('r1-')), 'read_committed sees no record of the aborted transaction');
  const uncommitted = await readAll(topic, true);
  check(uncommitted.length === 30, `read_uncommitted sees all 3: ${uncommitted.length} records (want 30)`);
  const out = await readAll(`${topic}-out`, false);
  check(out.length === 1 && out[0] === 'out', `output read_committed: ${JSON.stringify(out)} (want ["out"])`);
  const [offsets] = await admin.fetchOffsets({ groupId: group, topics: [topic] });
  const p0 = offsets.partitions.find((p) => p.partition === 0);
  check(p0 && p0.offset === '5', `offset sent to the transaction is committed: ${p0 && p0.offset} (want 5)`);
  await admin.disconnect();
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed > 0 ? 1 : 0);
})().catch((e) => {
  console.log(`FAIL ${e.stack || e}`);
  console.log(`${passed} passed, ${failed + 1} failed`);
  process.exit(1);
});
