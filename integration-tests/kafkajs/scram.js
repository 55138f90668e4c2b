// kafkajs logging in with SCRAM: SCRAM-SHA-256 over SASL_PLAINTEXT and SCRAM-SHA-512 over
// SASL_SSL (the broker's CA from a PEM file) each produce 3 records and read them back in a
// group; a wrong password is refused. One line per case.
// Run by it::sasl::kafkajs_scram_over_sasl_plaintext_and_sasl_ssl:
//   node scram.js SASL_PLAINTEXT_HOST:PORT SASL_SSL_HOST:PORT CA_PEM USER PASSWORD
'use strict';
const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');

const [saslPlaintext, saslSsl, caPem, user, password] = process.argv.slice(2);

async function roundTrip(name, kafka) {
  const topic = `kafkajs-${name}`;
  const producer = kafka.producer();
  await producer.connect();
  const offsets = [];
  for (let i = 0; i < 3; i++) {
    const [meta] = await producer.send({ topic, acks: -1, messages: [{ value: `v${i}` }] });
    offsets.push(meta.baseOffset);
  }
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: `g-${name}` });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const values = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, 15000);
    consumer.run({
      eachMessage: async ({ message }) => {
        values.push(message.value.toString());
        if (values.length === 3) { clearTimeout(timer); resolve(); }
      },
    }).catch(reject);
  });
  await consumer.disconnect();
  return `${name} ok offsets=${offsets.join(',')} values=${values.join(',')}`;
}

async function run(name, config) {
  const kafka = new Kafka({ logLevel: logLevel.NOTHING, retry: { retries: 0 }, ...config });
  try {
    return await roundTrip(name, kafka);
  } catch (e) {
    return `${name} refused ${e.name}: ${e.message}`;
  }
}

(async () => {
  const ssl = { ca: [fs.readFileSync(caPem)] };
  console.log(await run('scram256', {
    brokers: [saslPlaintext], sasl: { mechanism: 'scram-sha-256', username: user, password },
  }));
  console.log(await run('scram512ssl', {
    brokers: [saslSsl], ssl, sasl: { mechanism: 'scram-sha-512', username: user, password },
  }));
  console.log(await run('wrong', {
    brokers: [saslSsl], ssl, sasl: { mechanism: 'scram-sha-512', username: user, password: 'wrong' },
  }));
})();
