// kafkajs over SASL for skua's sasl compat suite:
//   node kafkajs-sasl.js BOOTSTRAP PROTOCOL MECHANISM USER PASSWORD CA TOPIC roundtrip|refused
// `roundtrip` produces 20 records and consumes them back in a consumer group; `refused`
// expects the broker to refuse the credentials and prints the client's error.
const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');

const [bootstrap, protocol, mechanism, username, password, ca, topic, mode] = process.argv.slice(2);
const kafka = new Kafka({
  clientId: 'skua-compat-sasl',
  brokers: [bootstrap],
  logLevel: logLevel.NOTHING,
  ssl: protocol === 'SASL_SSL' ? { ca: [fs.readFileSync(ca, 'utf8')], servername: 'localhost' } : false,
  sasl: { mechanism: mechanism.toLowerCase(), username, password },
  retry: { retries: 2 },
});

async function main() {
  if (mode === 'refused') {
    const admin = kafka.admin();
    try {
      await admin.connect();
      await admin.listTopics();
    } catch (e) {
      console.log('refused:', e.name, e.message);
      if (!/sasl|auth/i.test(`${e.name} ${e.message}`)) throw new Error(`no authentication error: ${e}`);
      return;
    }
    throw new Error('metadata answered with a wrong password');
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
