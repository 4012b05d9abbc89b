// kafkajs over TLS and SASL for skua's ssl and sasl compat suites:
//   node kafkajs-secure.js BOOTSTRAP TOPIC roundtrip|refused [KEY=VALUE...]
// The KEY=VALUE settings use librdkafka's names: security.protocol (SSL, SASL_PLAINTEXT or
// SASL_SSL), sasl.mechanism, sasl.username, sasl.password, ssl.ca.location,
// ssl.certificate.location and ssl.key.location (a client certificate and its key, PEM).
// `roundtrip` produces 20 records and consumes them back in a consumer group; `refused`
// expects the broker to refuse the client (over SASL its credentials, over SSL its
// certificate or the lack of one) and prints the client's error.
const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');

const [bootstrap, topic, mode, ...settings] = process.argv.slice(2);
const conf = Object.fromEntries(settings.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
const protocol = conf['security.protocol'];
const isSasl = protocol.startsWith('SASL_');
const tls = protocol === 'SSL' || protocol === 'SASL_SSL';
const read = (key) => fs.readFileSync(conf[key], 'utf8');
const kafka = new Kafka({
  clientId: 'skua-compat-secure',
  brokers: [bootstrap],
  logLevel: logLevel.NOTHING,
  ssl: tls ? {
    ca: [read('ssl.ca.location')],
    servername: 'localhost',
    ...(conf['ssl.certificate.location'] ? { cert: read('ssl.certificate.location'), key: read('ssl.key.location') } : {}),
  } : false,
  sasl: isSasl ? { mechanism: conf['sasl.mechanism'].toLowerCase(), username: conf['sasl.username'], password: conf['sasl.password'] } : undefined,
  retry: { retries: 2 },
});
// Whether an error says the broker refused the client as the protocol would: an
// authentication error over SASL, over SSL the TLS alert the broker sent (certificate
// required, unknown CA, bad certificate).
const refusal = (text) => (isSasl ? /sasl|auth/i : /alert|certificate|handshake/i).test(text);

async function main() {
  if (mode === 'refused') {
    const admin = kafka.admin();
    try {
      await admin.connect();
      await admin.listTopics();
    } catch (e) {
      console.log('refused:', e.name, e.message);
      if (!refusal(`${e.name} ${e.message}`)) throw new Error(`no refusal error: ${e}`);
      return;
    }
    throw new Error('metadata answered to a client the broker should refuse');
  }
  const sent = [...Array(20).keys()].map((i) => `kafkajs value ${i} over ${protocol}`);
  const producer = kafka.producer({ allowAutoTopicCreation: true });
  await producer.connect();
  await producer.send({ topic, messages: sent.map((value) => ({ value, partition: 0 })) });
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: `g-${Date.now()}` });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const got = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`consumed ${got.length} of 20`)), 40000);
    consumer.run({
      eachMessage: async ({ message }) => {
        got.push(message.value.toString());
        if (got.length === sent.length) { clearTimeout(timer); resolve(); }
      },
    });
  });
  await consumer.disconnect();
  if (JSON.stringify(got) !== JSON.stringify(sent)) throw new Error(`consumed ${got.slice(0, 3)}, not what was sent`);
  console.log('20 records produced and consumed back');
}

main().then(() => process.exit(0), (e) => { console.error(String(e)); process.exit(1); });
