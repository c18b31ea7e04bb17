// Drives kinesim with the AWS SDK for JavaScript v3 exactly as an application would: a
// KinesisClient with its DEFAULT request handler, which for Kinesis is NodeHttp2Handler
// (HTTP/2; against an http:// endpoint that is cleartext h2c with prior knowledge).
// Kinesis's default runtime config sets disableConcurrentStreams: true, so that client opens
// one HTTP/2 connection per call; one extra step uses a second client whose handler shares one
// connection, to check that kinesim multiplexes concurrent streams on a single h2c connection.
//
//   node kinesis_h2.mjs [endpoint]        (or KINESIM_URL=...; default http://127.0.0.1:4566)
//
// Every step is checked; on the first mismatch it prints "FAIL [step]: ..." to stderr and
// exits 1. On success the last stdout line is a JSON summary starting with {"ok":true.
//
// Environment: KINESIM_NODE_TIMEOUT_MS (whole run, default 120000),
//              KINESIM_NODE_MAX_ATTEMPTS (SDK attempts per call, default 1: no retries hide bugs).

import { createRequire } from "node:module";
import http from "node:http";
import https from "node:https";
import http2 from "node:http2";
import { randomUUID } from "node:crypto";

const require = createRequire(import.meta.url);

// ---- wire accounting: count HTTP/2 sessions and streams, and any HTTP/1.x request -----------
// The handler calls http2.connect() on the module object at call time, so wrapping it here
// sees every session it opens. http.request/https.request would be HTTP/1.1.
const wire = { h2Sessions: 0, h2Streams: 0, maxStreamsPerSession: 0, http1Requests: 0, h2SessionErrors: [] };
const realConnect = http2.connect;
http2.connect = function (...args) {
  const session = realConnect.apply(this, args);
  wire.h2Sessions += 1;
  let streams = 0;
  session.on("error", (e) => wire.h2SessionErrors.push(String(e && e.message)));
  const realRequest = session.request;
  session.request = function (...rargs) {
    wire.h2Streams += 1;
    streams += 1;
    wire.maxStreamsPerSession = Math.max(wire.maxStreamsPerSession, streams);
    return realRequest.apply(this, rargs);
  };
  return session;
};
for (const mod of [http, https]) {
  const realReq = mod.request;
  mod.request = function (...args) {
    wire.http1Requests += 1;
    return realReq.apply(this, args);
  };
}

const {
  KinesisClient, CreateStreamCommand, DescribeStreamSummaryCommand, PutRecordCommand,
  PutRecordsCommand, ListShardsCommand, GetShardIteratorCommand, GetRecordsCommand,
  SplitShardCommand, MergeShardsCommand, RegisterStreamConsumerCommand,
  DescribeStreamConsumerCommand, ListStreamConsumersCommand, SubscribeToShardCommand,
  DeregisterStreamConsumerCommand, DeleteStreamCommand, waitUntilStreamExists,
  waitUntilStreamNotExists,
} = await import("@aws-sdk/client-kinesis");

const sdkVersion = require("@aws-sdk/client-kinesis/package.json").version;
const endpoint = process.argv[2] || process.env.KINESIM_URL || "http://127.0.0.1:4566";
const overallMs = Number(process.env.KINESIM_NODE_TIMEOUT_MS || 120000);
const maxAttempts = Number(process.env.KINESIM_NODE_MAX_ATTEMPTS || 1);

let currentStep = "startup";
const timings = {};

function fail(message) {
  console.error(`FAIL [${currentStep}]: ${message}`);
  console.error(`wire: ${JSON.stringify(wire)}`);
  process.exit(1);
}

function check(cond, message) {
  if (!cond) fail(message);
}

function describeError(e) {
  if (!e) return String(e);
  const parts = [`${e.name || "Error"}: ${e.message}`];
  if (e.$metadata) parts.push(`http=${e.$metadata.httpStatusCode} attempts=${e.$metadata.attempts}`);
  if (e.$fault) parts.push(`fault=${e.$fault}`);
  if (e.$response && e.$response.statusCode) parts.push(`response status=${e.$response.statusCode}`);
  if (e.code) parts.push(`code=${e.code}`);
  if (e.cause) parts.push(`cause=${e.cause && e.cause.message ? e.cause.message : e.cause}`);
  return parts.join(" | ") + (e.stack ? `\n${e.stack}` : "");
}

async function step(name, fn) {
  currentStep = name;
  const t0 = performance.now();
  let result;
  try {
    result = await fn();
  } catch (e) {
    fail(`unexpected error: ${describeError(e)}`);
  }
  timings[name] = Math.round(performance.now() - t0);
  console.log(`ok ${name} (${timings[name]} ms)`);
  return result;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function poll(what, fn, { timeoutMs = 20000, intervalMs = 50 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    last = await fn();
    if (last.done) return last.value;
    await sleep(intervalMs);
  }
  fail(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${JSON.stringify(last && last.state)})`);
}

const watchdog = setTimeout(() => fail(`whole run exceeded ${overallMs} ms`), overallMs);
watchdog.unref();

const enc = new TextEncoder();
const dec = new TextDecoder();
const text = (bytes) => dec.decode(bytes);

// ---- the client: default request handler, asserted to be the HTTP/2 one ----------------------
const client = new KinesisClient({
  endpoint,
  region: "us-east-1",
  credentials: { accessKeyId: "test", secretAccessKey: "test" },
  maxAttempts,
});

const handlerInfo = await step("default-handler-is-h2", async () => {
  const handler = client.config.requestHandler;
  const name = handler && handler.constructor && handler.constructor.name;
  const proto = handler && handler.metadata && handler.metadata.handlerProtocol;
  check(name === "NodeHttp2Handler",
    `default requestHandler of KinesisClient is ${name}, expected NodeHttp2Handler (SDK ${sdkVersion})`);
  check(proto === "h2", `requestHandler.metadata.handlerProtocol is ${JSON.stringify(proto)}, expected "h2"`);
  return { name, proto };
});

const streamName = `node-h2-${randomUUID().slice(0, 12)}`;
const summary = async () =>
  (await client.send(new DescribeStreamSummaryCommand({ StreamName: streamName }))).StreamDescriptionSummary;
const waitActive = (what) => poll(what, async () => {
  const s = await summary();
  return { done: s.StreamStatus === "ACTIVE", value: s, state: s.StreamStatus };
});
const listShards = async () => {
  const shards = [];
  let token;
  do {
    const out = await client.send(new ListShardsCommand(token ? { NextToken: token } : { StreamName: streamName }));
    shards.push(...out.Shards);
    token = out.NextToken;
  } while (token);
  return shards;
};
const isOpen = (s) => !s.SequenceNumberRange.EndingSequenceNumber;
const range = (s) => [BigInt(s.HashKeyRange.StartingHashKey), BigInt(s.HashKeyRange.EndingHashKey)];

// ---- CreateStream (2 shards), wait ACTIVE ---------------------------------------------------
const streamArn = await step("CreateStream", async () => {
  const out = await client.send(new CreateStreamCommand({ StreamName: streamName, ShardCount: 2 }));
  check(out.$metadata.httpStatusCode === 200, `CreateStream status ${out.$metadata.httpStatusCode}`);
  const s = await waitActive("stream ACTIVE after CreateStream");
  check(s.OpenShardCount === 2, `OpenShardCount ${s.OpenShardCount}, expected 2`);
  check(typeof s.StreamARN === "string" && s.StreamARN.endsWith(`:stream/${streamName}`),
    `StreamARN ${s.StreamARN} does not end with :stream/${streamName}`);
  // the SDK's own waiter (DescribeStream polling) must agree
  const w = await waitUntilStreamExists({ client, maxWaitTime: 10, minDelay: 1 }, { StreamName: streamName });
  check(w.state === "SUCCESS", `waitUntilStreamExists state ${w.state}`);
  return s.StreamARN;
});

// ---- PutRecord + PutRecords (50) ------------------------------------------------------------
const expected = new Map(); // data -> { pk, seq, shard }
await step("PutRecord", async () => {
  const data = "node-single-0";
  const out = await client.send(new PutRecordCommand({ StreamName: streamName, PartitionKey: "pk-single", Data: enc.encode(data) }));
  check(/^shardId-\d{12}$/.test(out.ShardId || ""), `PutRecord ShardId ${out.ShardId}`);
  check(/^\d+$/.test(out.SequenceNumber || ""), `PutRecord SequenceNumber ${out.SequenceNumber}`);
  expected.set(data, { pk: "pk-single", seq: out.SequenceNumber, shard: out.ShardId });
});

await step("PutRecords", async () => {
  const entries = Array.from({ length: 50 }, (_, i) => ({
    PartitionKey: `pk-${i}`,
    Data: enc.encode(`node-batch-${i}-${"x".repeat(i)}`),
  }));
  const out = await client.send(new PutRecordsCommand({ StreamName: streamName, Records: entries }));
  check((out.FailedRecordCount ?? 0) === 0, `FailedRecordCount ${out.FailedRecordCount}: ${JSON.stringify(out.Records.filter((r) => r.ErrorCode))}`);
  check(out.Records.length === 50, `PutRecords returned ${out.Records.length} results, expected 50`);
  const shardsUsed = new Set();
  out.Records.forEach((r, i) => {
    check(r.SequenceNumber && r.ShardId, `PutRecords result ${i} has no SequenceNumber/ShardId: ${JSON.stringify(r)}`);
    shardsUsed.add(r.ShardId);
    expected.set(text(entries[i].Data), { pk: entries[i].PartitionKey, seq: r.SequenceNumber, shard: r.ShardId });
  });
  check(shardsUsed.size === 2, `50 partition keys landed on ${shardsUsed.size} shard(s), expected both`);
});

// ---- HTTP/2 multiplexing: 20 concurrent PutRecord calls on ONE h2c connection ------------------
const multiplexed = await step("PutRecord-multiplexed", async () => {
  const Handler = client.config.requestHandler.constructor; // NodeHttp2Handler, no extra dependency
  const shared = new KinesisClient({
    endpoint, region: "us-east-1", credentials: { accessKeyId: "test", secretAccessKey: "test" }, maxAttempts,
    requestHandler: new Handler({ disableConcurrentStreams: false }),
  });
  const sessionsBefore = wire.h2Sessions;
  const streamsBefore = wire.h2Streams;
  const datas = Array.from({ length: 20 }, (_, i) => `node-mux-${i}`);
  const outs = await Promise.all(datas.map((d, i) => shared.send(new PutRecordCommand({
    StreamName: streamName, PartitionKey: `mux-${i}`, Data: enc.encode(d),
  }))));
  outs.forEach((out, i) => {
    check(out.SequenceNumber && out.ShardId, `multiplexed PutRecord ${i}: ${JSON.stringify(out)}`);
    expected.set(datas[i], { pk: `mux-${i}`, seq: out.SequenceNumber, shard: out.ShardId });
  });
  const sessions = wire.h2Sessions - sessionsBefore;
  const streams = wire.h2Streams - streamsBefore;
  shared.destroy();
  check(sessions === 1, `20 concurrent calls with disableConcurrentStreams:false opened ${sessions} h2 sessions, expected 1`);
  check(streams === 20, `20 concurrent calls made ${streams} h2 streams`);
  return { calls: 20, sessions, streams };
});

// ---- GetShardIterator + GetRecords: read everything back -------------------------------------
async function readShard(shardId, { untilClosed = false } = {}) {
  let it = (await client.send(new GetShardIteratorCommand({
    StreamName: streamName, ShardId: shardId, ShardIteratorType: "TRIM_HORIZON",
  }))).ShardIterator;
  check(typeof it === "string" && it.length > 0, `GetShardIterator for ${shardId} returned ${it}`);
  const records = [];
  let childShards;
  for (let calls = 0; ; calls++) {
    check(calls < 200, `GetRecords on ${shardId} did not reach the end after 200 calls`);
    const out = await client.send(new GetRecordsCommand({ ShardIterator: it, Limit: 20 }));
    records.push(...out.Records);
    if (!out.NextShardIterator) { childShards = out.ChildShards; break; }
    if (!untilClosed && out.Records.length === 0 && out.MillisBehindLatest === 0) break;
    it = out.NextShardIterator;
  }
  return { records, childShards };
}

const readBack = await step("GetRecords", async () => {
  const shards = await listShards();
  check(shards.length === 2, `ListShards returned ${shards.length} shards, expected 2`);
  let total = 0;
  for (const shard of shards) {
    const { records } = await readShard(shard.ShardId);
    let prev = -1n;
    for (const r of records) {
      const data = text(r.Data);
      const want = expected.get(data);
      check(want, `GetRecords on ${shard.ShardId} returned unexpected data ${JSON.stringify(data.slice(0, 80))}`);
      check(want.shard === shard.ShardId, `record ${data} read from ${shard.ShardId}, put reported ${want.shard}`);
      check(want.seq === r.SequenceNumber, `record ${data}: sequence ${r.SequenceNumber}, put reported ${want.seq}`);
      check(want.pk === r.PartitionKey, `record ${data}: partition key ${r.PartitionKey}, expected ${want.pk}`);
      check(r.ApproximateArrivalTimestamp instanceof Date && !isNaN(r.ApproximateArrivalTimestamp),
        `record ${data}: ApproximateArrivalTimestamp ${r.ApproximateArrivalTimestamp}`);
      const seq = BigInt(r.SequenceNumber);
      check(seq > prev, `records on ${shard.ShardId} out of sequence order (${r.SequenceNumber} after ${prev})`);
      prev = seq;
    }
    total += records.length;
  }
  check(total === expected.size, `read back ${total} records, put ${expected.size}`);
  return total;
});

// ---- SplitShard (midpoint) + MergeShards (two adjacent open shards) --------------------------
const splitInfo = await step("SplitShard", async () => {
  const before = await listShards();
  const parent = before.find(isOpen);
  const [lo, hi] = range(parent);
  const mid = (lo + hi) / 2n;
  await client.send(new SplitShardCommand({
    StreamName: streamName, ShardToSplit: parent.ShardId, NewStartingHashKey: mid.toString(),
  }));
  await waitActive("stream ACTIVE after SplitShard");
  const after = await listShards();
  check(after.length === 4, `after split ListShards has ${after.length} shards, expected 4`);
  const open = after.filter(isOpen);
  check(open.length === 3, `after split ${open.length} open shards, expected 3`);
  const closedParent = after.find((s) => s.ShardId === parent.ShardId);
  check(closedParent && !isOpen(closedParent), `split parent ${parent.ShardId} is not closed: ${JSON.stringify(closedParent)}`);
  const children = after.filter((s) => s.ParentShardId === parent.ShardId);
  check(children.length === 2, `split produced ${children.length} children of ${parent.ShardId}, expected 2`);
  children.sort((a, b) => (range(a)[0] < range(b)[0] ? -1 : 1));
  check(range(children[0])[0] === lo && range(children[0])[1] === mid - 1n,
    `first child range ${JSON.stringify(children[0].HashKeyRange)}, expected ${lo}..${mid - 1n}`);
  check(range(children[1])[0] === mid && range(children[1])[1] === hi,
    `second child range ${JSON.stringify(children[1].HashKeyRange)}, expected ${mid}..${hi}`);
  // the closed parent still serves its records, then ends with ChildShards
  const { records, childShards } = await readShard(parent.ShardId, { untilClosed: true });
  const putThere = [...expected.values()].filter((v) => v.shard === parent.ShardId).length;
  check(records.length === putThere, `closed parent ${parent.ShardId} served ${records.length} records, expected ${putThere}`);
  const childIds = (childShards || []).map((c) => c.ShardId).sort();
  check(JSON.stringify(childIds) === JSON.stringify(children.map((c) => c.ShardId).sort()),
    `closed parent's last GetRecords ChildShards ${JSON.stringify(childIds)}, expected both split children`);
  return { parent: parent.ShardId, children: children.map((c) => c.ShardId), newStartingHashKey: mid.toString() };
});

const mergeInfo = await step("MergeShards", async () => {
  const open = (await listShards()).filter(isOpen).sort((a, b) => (range(a)[0] < range(b)[0] ? -1 : 1));
  let pair; // the last adjacent pair: a split child with an original shard, not the split undone
  for (let i = open.length - 2; i >= 0 && !pair; i--) {
    if (range(open[i])[1] + 1n === range(open[i + 1])[0]) pair = [open[i], open[i + 1]];
  }
  check(pair, `no two adjacent open shards among ${JSON.stringify(open.map((s) => s.HashKeyRange))}`);
  await client.send(new MergeShardsCommand({
    StreamName: streamName, ShardToMerge: pair[0].ShardId, AdjacentShardToMerge: pair[1].ShardId,
  }));
  await waitActive("stream ACTIVE after MergeShards");
  const after = await listShards();
  check(after.length === 5, `after merge ListShards has ${after.length} shards, expected 5`);
  const nowOpen = after.filter(isOpen);
  check(nowOpen.length === 2, `after merge ${nowOpen.length} open shards, expected 2`);
  const child = after.find((s) => s.ParentShardId === pair[0].ShardId && s.AdjacentParentShardId === pair[1].ShardId);
  check(child && isOpen(child), `no open merged child with parents ${pair[0].ShardId}+${pair[1].ShardId}: ${JSON.stringify(after)}`);
  check(range(child)[0] === range(pair[0])[0] && range(child)[1] === range(pair[1])[1],
    `merged range ${JSON.stringify(child.HashKeyRange)} does not cover both parents`);
  const s = await summary();
  check(s.OpenShardCount === 2, `OpenShardCount after merge ${s.OpenShardCount}, expected 2`);
  // new writes land on open shards only
  const put = await client.send(new PutRecordCommand({
    StreamName: streamName, PartitionKey: "pk-after-merge", Data: enc.encode("after-merge"),
    ExplicitHashKey: range(child)[0].toString(),
  }));
  check(put.ShardId === child.ShardId, `PutRecord with ExplicitHashKey in merged range went to ${put.ShardId}, expected ${child.ShardId}`);
  return { merged: [pair[0].ShardId, pair[1].ShardId], child: child.ShardId, openShards: nowOpen.map((x) => x.ShardId) };
});

// ---- enhanced fan-out: RegisterStreamConsumer, SubscribeToShard over HTTP/2 ---------------------
const consumerName = `node-efo-${randomUUID().slice(0, 8)}`;
const consumerArn = await step("RegisterStreamConsumer", async () => {
  const out = await client.send(new RegisterStreamConsumerCommand({ StreamARN: streamArn, ConsumerName: consumerName }));
  const arn = out.Consumer && out.Consumer.ConsumerARN;
  check(typeof arn === "string" && arn.includes(`/consumer/${consumerName}:`), `ConsumerARN ${arn}`);
  await poll("consumer ACTIVE", async () => {
    const d = await client.send(new DescribeStreamConsumerCommand({ ConsumerARN: arn }));
    const st = d.ConsumerDescription.ConsumerStatus;
    return { done: st === "ACTIVE", value: st, state: st };
  });
  return arn;
});

// Consume the event stream until `want` records (by data) have arrived or `ms` pass.
async function subscribe(shardId, startingPosition, want, afterSubscribed, ms = 15000) {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), ms);
  const got = [];
  let events = 0;
  let lastContinuation;
  try {
    const out = await client.send(new SubscribeToShardCommand({
      ConsumerARN: consumerArn, ShardId: shardId, StartingPosition: startingPosition,
    }), { abortSignal: abort.signal });
    check(out.$metadata.httpStatusCode === 200, `SubscribeToShard status ${out.$metadata.httpStatusCode}`);
    check(out.EventStream && typeof out.EventStream[Symbol.asyncIterator] === "function",
      "SubscribeToShard output has no async-iterable EventStream");
    if (afterSubscribed) await afterSubscribed();
    for await (const event of out.EventStream) {
      const keys = Object.keys(event).filter((k) => event[k] !== undefined);
      if (!event.SubscribeToShardEvent) fail(`event stream delivered ${JSON.stringify(keys)}: ${JSON.stringify(event)}`);
      const e = event.SubscribeToShardEvent;
      events += 1;
      check(typeof e.ContinuationSequenceNumber === "string", `event without ContinuationSequenceNumber: ${JSON.stringify(e)}`);
      check(typeof e.MillisBehindLatest === "number", `event without MillisBehindLatest: ${JSON.stringify(e)}`);
      lastContinuation = e.ContinuationSequenceNumber;
      for (const r of e.Records) got.push(text(r.Data));
      if (want.every((d) => got.includes(d))) break; // closes the HTTP/2 stream
    }
  } catch (e) {
    if (abort.signal.aborted) {
      fail(`within ${ms} ms got ${got.length}/${want.length} records over ${events} events (missing ${JSON.stringify(want.filter((d) => !got.includes(d)).slice(0, 5))})`);
    }
    throw e;
  } finally {
    clearTimeout(timer);
  }
  check(want.every((d) => got.includes(d)),
    `event stream ended after ${events} events with ${got.length}/${want.length} records`);
  const extra = got.filter((d) => !want.includes(d));
  check(extra.length === 0, `unexpected records on the subscription: ${JSON.stringify(extra.slice(0, 5))}`);
  const order = want.filter((d) => got.includes(d));
  check(JSON.stringify(got) === JSON.stringify(order), `records arrived out of order: ${JSON.stringify(got)}`);
  return { events, records: got.length, lastContinuation };
}

const subscribeLatest = await step("SubscribeToShard-LATEST", async () => {
  const shard = (await listShards()).find((s) => s.ShardId === mergeInfo.openShards.find((id) => id !== mergeInfo.child));
  const hashKey = range(shard)[0].toString();
  const want = Array.from({ length: 10 }, (_, i) => `efo-live-${i}`);
  return subscribe(shard.ShardId, { Type: "LATEST" }, want, async () => {
    await sleep(100);
    const out = await client.send(new PutRecordsCommand({
      StreamName: streamName,
      Records: want.map((d) => ({ PartitionKey: "efo", ExplicitHashKey: hashKey, Data: enc.encode(d) })),
    }));
    check((out.FailedRecordCount ?? 0) === 0, `PutRecords while subscribed failed: ${JSON.stringify(out.Records)}`);
    check(out.Records.every((r) => r.ShardId === shard.ShardId), `live records not all on ${shard.ShardId}`);
  });
});

const subscribeTrim = await step("SubscribeToShard-TRIM_HORIZON", async () =>
  // the merged child holds exactly the one record put after the merge
  subscribe(mergeInfo.child, { Type: "TRIM_HORIZON" }, ["after-merge"]));

await step("DeregisterStreamConsumer", async () => {
  await client.send(new DeregisterStreamConsumerCommand({ ConsumerARN: consumerArn }));
  await poll("consumer gone from ListStreamConsumers", async () => {
    const out = await client.send(new ListStreamConsumersCommand({ StreamARN: streamArn }));
    const names = (out.Consumers || []).map((c) => `${c.ConsumerName}:${c.ConsumerStatus}`);
    return { done: !names.some((n) => n.startsWith(`${consumerName}:`)), state: names };
  });
});

await step("DeleteStream", async () => {
  await client.send(new DeleteStreamCommand({ StreamName: streamName }));
  await poll("stream gone", async () => {
    try {
      const s = await summary();
      return { done: false, state: s.StreamStatus };
    } catch (e) {
      if (e.name === "ResourceNotFoundException") return { done: true };
      throw e;
    }
  });
  const w = await waitUntilStreamNotExists({ client, maxWaitTime: 10, minDelay: 1 }, { StreamName: streamName });
  check(w.state === "SUCCESS", `waitUntilStreamNotExists state ${w.state}`);
});

currentStep = "wire";
check(wire.http1Requests === 0, `${wire.http1Requests} request(s) went over HTTP/1.x`);
check(wire.h2Sessions >= 1 && wire.h2Streams >= 1, `no HTTP/2 traffic recorded: ${JSON.stringify(wire)}`);

client.destroy();
clearTimeout(watchdog);
console.log(JSON.stringify({
  ok: true,
  sdk: `@aws-sdk/client-kinesis@${sdkVersion}`,
  node: process.version,
  endpoint,
  handler: handlerInfo.name,
  handlerProtocol: handlerInfo.proto,
  wire,
  multiplexed,
  stream: streamName,
  recordsPut: expected.size,
  recordsReadBack: readBack,
  split: splitInfo,
  merge: mergeInfo,
  subscribeLatest,
  subscribeTrimHorizon: subscribeTrim,
  timingsMs: timings,
}));
