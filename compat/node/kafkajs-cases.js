// skua compatibility suite: kafkajs (pure JavaScript client).
//   node kafkajs-cases.js HOST:PORT
// Prints one `PASS id` / `FAIL id: reason` line per case. kafkajs consumers always use a
// consumer group, so every consume case needs group support in the broker.
'use strict';
const crypto = require('crypto');
const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = require('kafkajs');
const SnappyCodec = require('kafkajs-snappy');

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec;

const bootstrap = process.argv[2] || process.env.COMPAT_BOOTSTRAP || '127.0.0.1:9092';
const kafka = new Kafka({
  clientId: 'skua-compat-kafkajs',
  brokers: [bootstrap],
  logLevel: process.env.COMPAT_VERBOSE ? logLevel.INFO : logLevel.NOTHING,
  connectionTimeout: 10000,
  requestTimeout: 30000,
  retry: { retries: 5 },
});
const BASE_TS = 1700000000000;
const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP, snappy: CompressionTypes.Snappy };
const topicName = (what) => `compat-kafkajs-${what}-${crypto.randomBytes(4).toString('hex')}`;
const topics = {}; // codec -> topic produced to, for the consume cases
const created = [];

function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

async function run(id, fn, timeoutMs = 60000) {
  let timer;
  try {
    await Promise.race([fn(), new Promise((_, rej) => { timer = setTimeout(() => rej(new Error(`timed out after ${timeoutMs / 1000}s`)), timeoutMs); })]);
    console.log(`PASS ${id}`);
  } catch (e) {
    console.log(`FAIL ${id}: ${String(e && e.message ? `${e.name}: ${e.message}` : e).replace(/\n/g, ' ').slice(0, 400)}`);
  } finally {
    clearTimeout(timer);
  }
}

async function withAdmin(fn) {
  const admin = kafka.admin();
  await admin.connect();
  try {
    return await fn(admin);
  } finally {
    await admin.disconnect();
  }
}

async function createTopic(topic, numPartitions = 1) {
  await withAdmin(async (admin) => {
    const ok = await admin.createTopics({ topics: [{ topic, numPartitions, replicationFactor: 1 }], waitForLeaders: true, timeout: 30000 });
    check(ok === true, `createTopics returned ${ok}`);
  });
  created.push(topic);
}

function records(n, codec) {
  const out = [];
  for (let i = 0; i < n; i++) {
    out.push({
      key: `key-${i}`,
      value: `value-${i}-${codec}-`.repeat(8),
      headers: { 'h-index': String(i), codec },
      timestamp: String(BASE_TS + i),
      partition: 0,
    });
  }
  return out;
}

async function produce(codec, opts = {}) {
  const topic = topicName(codec);
  await createTopic(topic);
  const producer = kafka.producer({ allowAutoTopicCreation: false, ...opts });
  await producer.connect();
  try {
    const msgs = records(200, codec);
    const r1 = await producer.send({ topic, compression: CODECS[codec], acks: -1, messages: msgs.slice(0, 100) });
    const r2 = await producer.send({ topic, compression: CODECS[codec], acks: -1, messages: msgs.slice(100) });
    check(r1.length === 1 && r1[0].errorCode === 0 && r1[0].baseOffset === '0', `first send: ${JSON.stringify(r1)}`);
    check(r2[0].errorCode === 0 && r2[0].baseOffset === '100', `second send: ${JSON.stringify(r2)}`);
  } finally {
    await producer.disconnect();
  }
  const offs = await withAdmin((admin) => admin.fetchTopicOffsets(topic));
  check(offs.length === 1 && offs[0].high === '200' && offs[0].low === '0', `offsets ${JSON.stringify(offs)}`);
  topics[codec] = topic;
}

async function adminTopics() {
  const topic = topicName('admin');
  await withAdmin(async (admin) => {
    check(await admin.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 1 }], waitForLeaders: true }) === true, 'create');
    check(await admin.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 1 }] }) === false, 'second create should report false');
    check((await admin.listTopics()).includes(topic), 'listTopics');
    const md = await admin.fetchTopicMetadata({ topics: [topic] });
    const parts = md.topics[0].partitions;
    check(parts.length === 3, `partitions ${parts.length}`);
    for (const p of parts) check(p.leader >= 0 && p.replicas.length === 1 && p.isr.length === 1, `partition ${JSON.stringify(p)}`);
    await admin.createPartitions({ topicPartitions: [{ topic, count: 5 }] });
    const md2 = await admin.fetchTopicMetadata({ topics: [topic] });
    check(md2.topics[0].partitions.length === 5, 'createPartitions');
    await admin.deleteTopics({ topics: [topic], timeout: 30000 });
    for (let i = 0; i < 40 && (await admin.listTopics()).includes(topic); i++) await new Promise((r) => setTimeout(r, 250));
    check(!(await admin.listTopics()).includes(topic), 'topic still listed after deleteTopics');
  });
}

async function offsetsByTimestamp() {
  const topic = topicName('times');
  await createTopic(topic);
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({ topic, messages: [0, 1, 2, 3, 4].map((i) => ({ value: `v${i}`, partition: 0, timestamp: String(BASE_TS + 1000 * i) })) });
  await producer.disconnect();
  await withAdmin(async (admin) => {
    const r = await admin.fetchTopicOffsetsByTimestamp(topic, BASE_TS + 2500);
    check(r.length === 1 && r[0].offset === '3', `offset for ts: ${JSON.stringify(r)}`);
  });
}

async function describeCluster() {
  await withAdmin(async (admin) => {
    const c = await admin.describeCluster();
    check(c.brokers.length >= 1 && c.clusterId, `describeCluster ${JSON.stringify(c)}`);
    check(c.brokers.some((b) => `${b.host}:${b.port}` === bootstrap), `advertised ${JSON.stringify(c.brokers)}`);
  });
}

async function consumeGroup(codec) {
  const topic = topics[codec];
  check(topic, `produce case for ${codec} did not run`);
  const consumer = kafka.consumer({ groupId: topicName('g'), sessionTimeout: 10000, heartbeatInterval: 1000 });
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    const got = [];
    await new Promise((resolve, reject) => {
      consumer.run({
        eachMessage: async ({ message }) => {
          got.push(message);
          if (got.length === 200) resolve();
        },
      }).catch(reject);
    });
    const want = records(200, codec);
    got.forEach((m, i) => {
      check(m.offset === String(i), `record ${i}: offset ${m.offset}`);
      check(m.key.toString() === want[i].key && m.value.toString() === want[i].value, `record ${i}: key/value`);
      check(m.timestamp === want[i].timestamp, `record ${i}: timestamp ${m.timestamp}`);
      check(m.headers['h-index'].toString() === String(i) && m.headers.codec.toString() === codec, `record ${i}: headers`);
    });
  } finally {
    await consumer.disconnect();
  }
}

async function transactions() {
  const topic = topicName('txn');
  await createTopic(topic);
  const producer = kafka.producer({ transactionalId: topicName('tid'), idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  try {
    const txn = await producer.transaction();
    await txn.send({ topic, messages: [{ value: 'committed', partition: 0 }] });
    await txn.commit();
    const txn2 = await producer.transaction();
    await txn2.send({ topic, messages: [{ value: 'aborted', partition: 0 }] });
    await txn2.abort();
  } finally {
    await producer.disconnect();
  }
  const offs = await withAdmin((admin) => admin.fetchTopicOffsets(topic));
  // committed record + its marker + aborted record + its marker
  check(offs[0].high === '4', `high watermark ${offs[0].high}`);
}

(async () => {
  console.log(`# kafkajs ${require('kafkajs/package.json').version}`);
  await run('kafkajs.admin.topics', adminTopics);
  await run('kafkajs.admin.describe_cluster', describeCluster);
  for (const codec of Object.keys(CODECS)) await run(`kafkajs.produce.${codec}`, () => produce(codec));
  await run('kafkajs.produce.idempotent', () => produce('none', { idempotent: true, maxInFlightRequests: 1 }));
  await run('kafkajs.admin.offsets_by_timestamp', offsetsByTimestamp);
  for (const codec of Object.keys(CODECS)) await run(`kafkajs.consume.group.${codec}`, () => consumeGroup(codec), 30000);
  await run('kafkajs.txn.commit_abort', transactions, 30000);
  await withAdmin((admin) => admin.deleteTopics({ topics: created, timeout: 30000 })).catch(() => {});
  process.exit(0);
})();
