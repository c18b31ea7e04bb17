// Drives kinesim with the AWS SDK for JavaScript v3 browser build (window.KinesisSDK, see entry.js)
// and shows what it saw as JSON in <pre id="result">. It also POSTs the same JSON to /result on its
// own origin, where tests/test_browser.py's page server waits for it.
"use strict";

const params = new URLSearchParams(location.search);
const DEADLINE_MS = Number(params.get("deadline_ms") || 60000);
const started = Date.now();

const toB64 = (bytes) => btoa(String.fromCharCode(...bytes));
const utf8 = (text) => new TextEncoder().encode(text);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function describeError(err) {
  return {
    name: err && err.name,
    message: err && err.message,
    status: (err && err.$metadata && err.$metadata.httpStatusCode) || null,
    requestId: (err && err.$metadata && err.$metadata.requestId) || null,
    fault: err ? err.$fault || null : null,
  };
}

function remaining() {
  const left = DEADLINE_MS - (Date.now() - started);
  if (left <= 0) throw new Error(`page deadline of ${DEADLINE_MS} ms passed`);
  return left;
}

// The records the page puts: text, and binary bytes (every byte value) to check base64 both ways.
function recordsToPut() {
  const binary = Uint8Array.from({ length: 256 }, (_, i) => i);
  return [
    { Data: utf8("one record from PutRecord"), PartitionKey: "pk-single" },
    { Data: utf8("batch record 1 \u00e9\u4e2d"), PartitionKey: "pk-a" },
    { Data: binary, PartitionKey: "pk-b" },
    { Data: utf8("batch record 3"), PartitionKey: "pk-c" },
  ];
}

async function run(steps) {
  const sdk = window.KinesisSDK;
  const stream = params.get("stream");
  const client = new sdk.KinesisClient({
    endpoint: params.get("endpoint"),
    region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
    maxAttempts: 1,
  });
  const call = async (label, command) => {
    steps.push(label);
    return client.send(command);
  };

  const created = await call("CreateStream", new sdk.CreateStreamCommand({ StreamName: stream, ShardCount: 1 }));
  const requestIds = [created.$metadata.requestId || null];
  let status;
  for (;;) {
    const summary = await call("DescribeStreamSummary",
      new sdk.DescribeStreamSummaryCommand({ StreamName: stream }));
    status = summary.StreamDescriptionSummary.StreamStatus;
    if (status === "ACTIVE") break;
    await sleep(Math.min(100, remaining()));
  }

  const [single, ...batch] = recordsToPut();
  const putOne = await call("PutRecord", new sdk.PutRecordCommand({ StreamName: stream, ...single }));
  const putMany = await call("PutRecords", new sdk.PutRecordsCommand({ StreamName: stream, Records: batch }));
  requestIds.push(putOne.$metadata.requestId || null, putMany.$metadata.requestId || null);

  const shards = await call("ListShards", new sdk.ListShardsCommand({ StreamName: stream }));
  const iterator = await call("GetShardIterator", new sdk.GetShardIteratorCommand({
    StreamName: stream, ShardId: shards.Shards[0].ShardId, ShardIteratorType: "TRIM_HORIZON" }));
  const read = [];
  let next = iterator.ShardIterator;
  while (read.length < 4 && next) {
    const got = await call("GetRecords", new sdk.GetRecordsCommand({ ShardIterator: next, Limit: 100 }));
    requestIds.push(got.$metadata.requestId || null);
    for (const r of got.Records) {
      read.push({ data: toB64(r.Data), partitionKey: r.PartitionKey, sequenceNumber: r.SequenceNumber,
                  arrival: r.ApproximateArrivalTimestamp instanceof Date });
    }
    next = got.NextShardIterator;
    if (read.length < 4) await sleep(Math.min(100, remaining()));
  }

  // A call that fails: the SDK must see AWS's error (name, status, request id), not a network error.
  let failure = null;
  try {
    await call("DescribeStreamSummary(missing)",
      new sdk.DescribeStreamSummaryCommand({ StreamName: stream + "-missing" }));
  } catch (err) {
    failure = describeError(err);
  }

  return {
    ok: true,
    stream,
    status,
    put: [single, ...batch].map((r) => ({ data: toB64(r.Data), partitionKey: r.PartitionKey })),
    putSequenceNumbers: [putOne.SequenceNumber, ...putMany.Records.map((r) => r.SequenceNumber)],
    putShardIds: [putOne.ShardId, ...putMany.Records.map((r) => r.ShardId)],
    failedRecordCount: putMany.FailedRecordCount,
    read,
    requestIds,
    failure,
  };
}

async function report(result) {
  const text = JSON.stringify(result);
  document.getElementById("result").textContent = text;
  await fetch("/result", { method: "POST", body: text, headers: { "Content-Type": "application/json" } });
}

window.addEventListener("error", (event) => {
  report({ ok: false, steps: [], error: { name: "PageError", message: String(event.message) } });
});

(async () => {
  const steps = [];
  let result;
  try {
    if (!window.KinesisSDK) throw new Error("dist/kinesis-sdk.js did not load");
    result = await run(steps);
  } catch (err) {
    result = { ok: false, error: describeError(err) };
  }
  result.steps = steps;
  result.origin = location.origin;
  await report(result);
})();
