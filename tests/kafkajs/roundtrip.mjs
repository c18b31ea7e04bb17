// kafkajs against kinesim's Kafka port (tests/test_kafka_tools.py): `node roundtrip.mjs BROKER TOPIC
// [consume]` produces three records (keys, headers), prints the topic's offsets as kafkajs' admin
// reads them and, with `consume`, what a group consumer reads from the beginning; one JSON line.
import { Kafka, logLevel } from "kafkajs";

const [broker, topic, mode] = process.argv.slice(2);
const kafka = new Kafka({ clientId: "kinesim-kafkajs", brokers: [broker], logLevel: logLevel.ERROR,
                          retry: { retries: 3 } });
const sent = [0, 1, 2].map((i) => ({ key: `k${i}`, value: `value-${i}`, headers: { h: `${i}` } }));

const producer = kafka.producer({ allowAutoTopicCreation: true });
await producer.connect();
const acks = await producer.send({ topic, acks: -1, messages: sent });
await producer.disconnect();

const admin = kafka.admin();
await admin.connect();
const offsets = await admin.fetchTopicOffsets(topic);
await admin.disconnect();

const out = { acks, offsets, received: [] };
if (mode === "consume") {
  const consumer = kafka.consumer({ groupId: `g-${topic}`, sessionTimeout: 10000, heartbeatInterval: 1000 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`consumed ${out.received.length} of ${sent.length}`)), 30000);
    consumer.run({ eachMessage: async ({ message, partition }) => {
      out.received.push({ partition, offset: message.offset, key: message.key.toString(),
                          value: message.value.toString(), h: message.headers.h.toString() });
      if (out.received.length === sent.length) { clearTimeout(timer); resolve(); }
    } }).catch(reject);
  });
  await consumer.disconnect();
}
console.log(JSON.stringify(out));
