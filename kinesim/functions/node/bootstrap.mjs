// One warm execution environment for a Node.js handler, behaving as AWS's Node.js runtime
// (aws-lambda-nodejs-runtime-interface-client) does: the same handler loading (CommonJS, ES
// modules, package.json "type"), `context`, callbacks and callbackWaitsForEmptyEventLoop up to
// Node.js 22, async handlers only from Node.js 24 (RIC v4), console lines in its text format and
// errors in its shape. The facts come from AWS's source; the code is kinesim's own.
//
// runtime.py starts it as `node bootstrap.mjs CHANNEL_FD OUTPUT_FD` in the function's code
// directory with the function's environment. CHANNEL_FD is a socket speaking worker.py's protocol
// (multiprocessing.connection frames: a 4-byte big-endian length, or -1 and 8 bytes; each frame a
// JSON header line and a raw body). OUTPUT_FD is the non-blocking read end of the pipe that file
// descriptors 1 and 2 write into (subprocesses, native code).
//
// Between invocations the process blocks in a synchronous read of the channel, as AWS's runtime
// blocks in its native `next()`: a handler's leftover timers stay frozen until the next invocation,
// and while one runs nothing of ours keeps the event loop alive, so 'beforeExit' tells when the
// handler's work is done (callbackWaitsForEmptyEventLoop).
import fs from 'node:fs';
import module from 'node:module';
import path from 'node:path';
import util from 'node:util';

import { LineSink, openChannel } from './channel.mjs';
import { intoError, runtimeError, toResponse } from './errors.mjs';
import { STREAMING, loadHandler } from './loader.mjs';
import { syncHooks } from './node_path_hooks.mjs';
import { routeResponses } from './response_route.mjs';

const { receive, send } = openChannel(Number(process.argv[2]));
routeResponses(process.env.AWS_ENDPOINT_URL);
const OUTPUT = Number(process.argv[3]);
const RUNTIME = (process.env.AWS_EXECUTION_ENV || '').replace(/^AWS_Lambda_/, '');
const RUNTIME_MAJOR = Number((RUNTIME.match(/^nodejs(\d+)/) || [])[1] || process.versions.node.split('.')[0]);
const CALLBACKS = RUNTIME_MAJOR <= 22; // RIC v4 (Node.js 24+) removed callback handlers

// --- output: every line becomes a log event, in the order it was written -------------------------

const sendLog = (events) => send({ t: 'log', events });
const fdSink = new LineSink(sendLog);
const outBuf = Buffer.alloc(65536);

// What subprocesses wrote to fds 1 and 2 came before anything this process logs now.
function drainOutput() {
  for (;;) {
    let n;
    try {
      n = fs.readSync(OUTPUT, outBuf, 0, outBuf.length, null);
    } catch (e) {
      if (e.code === 'EINTR') continue;
      return; // EAGAIN: nothing more for now
    }
    if (n === 0) return;
    fdSink.write(Buffer.from(outBuf.subarray(0, n)));
  }
}

function emit(events) {
  drainOutput();
  sendLog(events);
}

const stdoutSink = new LineSink(emit);
const stderrSink = new LineSink(emit);
for (const [stream, sink] of [[process.stdout, stdoutSink], [process.stderr, stderrSink]]) {
  stream.write = (chunk, encoding, cb) => {
    if (typeof encoding === 'function') [cb, encoding] = [encoding, undefined];
    sink.write(typeof chunk === 'string' ? Buffer.from(chunk, encoding || 'utf8') : Buffer.from(chunk));
    if (typeof cb === 'function') process.nextTick(cb);
    return true;
  };
}

function flushOutput() {
  drainOutput();
  for (const sink of [stdoutSink, stderrSink, fdSink]) sink.flush();
}

// --- console, as AWS's runtime patches it (LogPatch.js) ---------------------------------------------

const REQUEST_ID = Symbol.for('aws.lambda.runtime.requestId');
const LEVELS = { TRACE: 1, DEBUG: 2, INFO: 3, WARN: 4, ERROR: 5, FATAL: 6 };
const JSON_FORMAT = (process.env.AWS_LAMBDA_LOG_FORMAT || '').toUpperCase() === 'JSON';

function errorFields(value) {
  return Object.assign({
    errorType: value?.constructor?.name ?? 'UnknownError',
    errorMessage: value.message,
    stackTrace: typeof value.stack === 'string' ? value.stack.split('\n') : value.stack,
  }, value);
}

function jsonLine(time, level, message, params) {
  const result = { timestamp: time, level, requestId: globalThis[REQUEST_ID] };
  if (params.length === 0) {
    result.message = message;
    try {
      return JSON.stringify(result, (_k, v) => (v instanceof Error ? errorFields(v) : v));
    } catch {
      result.message = util.format(message);
      return JSON.stringify(result);
    }
  }
  result.message = util.format(message, ...params);
  const error = [message, ...params].find((p) => p instanceof Error);
  if (error) {
    result.errorType = error?.constructor?.name ?? 'UnknownError';
    result.errorMessage = error.message;
    result.stackTrace = typeof error.stack === 'string' ? error.stack.split('\n') : [];
  }
  return JSON.stringify(result);
}

function logAt(level) {
  return (message, ...params) => {
    const date = new Date();
    const time = date.toISOString();
    // One event per call, multi-line messages included, as through AWS's telemetry log fd
    const text = JSON_FORMAT ? jsonLine(time, level, message, params)
      : `${time}\t${globalThis[REQUEST_ID]}\t${level}\t${util.format(message, ...params)}\n`;
    emit([[date.valueOf(), text]]);
  };
}

const threshold = LEVELS[(process.env.AWS_LAMBDA_LOG_LEVEL || '').toUpperCase()] ?? LEVELS.TRACE;
const nop = () => {};
for (const [method, level] of [['trace', 'TRACE'], ['debug', 'DEBUG'], ['info', 'INFO'], ['warn', 'WARN'],
  ['error', 'ERROR']]) {
  console[method] = LEVELS[level] >= threshold ? logAt(level) : nop;
}
console.log = console.info;
console.fatal = logAt('FATAL');

// The log line: "Invoke Error \t{...}" with the error's enumerable properties and its stack as lines
function logError(label, err) {
  const error = intoError(err);
  if (JSON_FORMAT) {
    console.error(error);
    return;
  }
  let text;
  try {
    text = '\t' + JSON.stringify(error, (_k, v) => {
      if (!(v instanceof Error)) return v;
      const out = Object.assign({ errorType: v.name, errorMessage: v.message, code: v.code }, v);
      if (typeof v.stack === 'string') out.stack = v.stack.split('\n');
      return out;
    });
  } catch {
    text = '\t' + JSON.stringify(toResponse(error));
  }
  console.error(label, text);
}

// Peak resident memory of this process, Lambda's "Max Memory Used". Not getrusage's maxRSS:
// Linux carries it over from the process that forked this one (the server) across exec, where
// VmHWM is this program's own.
function rssKb() {
  try {
    const match = fs.readFileSync('/proc/self/status', 'latin1').match(/^VmHWM:\s+(\d+)/m);
    if (match) return Number(match[1]);
  } catch { /* not Linux */ }
  return process.resourceUsage().maxRSS;
}

// --- invocations (Runtime.js, CallbackContext.js, InvokeContext.js) ------------------------------------

let beforeExit = () => {};
let onUncaught = null; // what an uncaught exception or rejection does now: fail the init or the invocation
let current = { answered: true }; // the invocation in progress: has it been answered?

function finish(header, body) {
  flushOutput();
  current.answered = true;
  send(header, body);
}

function respond(started, result) {
  let body;
  try {
    body = JSON.stringify(result === undefined ? null : result);
  } catch {
    throw new Error('Unable to stringify response body');
  }
  finish({ t: 'done', error: null, ms: performance.now() - started, rss_kb: rssKb() }, Buffer.from(body));
}

function respondError(started, err, exitCode) {
  const response = toResponse(err);
  finish({ t: 'done', error: response.errorType || 'Unhandled', ms: performance.now() - started, rss_kb: rssKb(),
    exit: exitCode ?? null }, Buffer.from(JSON.stringify(response)));
}

function neverSettled(started) {
  const err = runtimeError('NodeJsExit', 'The Lambda runtime client detected an unexpected Node.js exit code. '
    + 'This is most commonly caused by a Promise that was never settled. For more information, see '
    + 'https://nodejs.org/docs/latest/api/process.html#exit-codes');
  logError('Invoke Error', err);
  respondError(started, err);
}

function buildContext(header, callbackContext) {
  const deadline = header.deadline_ms;
  return Object.assign(callbackContext, {
    functionVersion: process.env.AWS_LAMBDA_FUNCTION_VERSION,
    functionName: process.env.AWS_LAMBDA_FUNCTION_NAME,
    memoryLimitInMB: process.env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE,
    logGroupName: process.env.AWS_LAMBDA_LOG_GROUP_NAME,
    logStreamName: process.env.AWS_LAMBDA_LOG_STREAM_NAME,
    clientContext: header.client_context ?? undefined,
    identity: header.identity ?? undefined,
    invokedFunctionArn: header.arn,
    awsRequestId: header.id,
    tenantId: undefined,
    getRemainingTimeInMillis: () => deadline - Date.now(),
  });
}

// Up to Node.js 22: the callback and context.succeed/fail/done, the first call of any of them wins;
// a callback's result waits for the event loop to empty unless callbackWaitsForEmptyEventLoop is false.
function callbackContext(started, scheduleNext) {
  let completed = false;
  let finished = false;
  let waitForEmptyEventLoop = true;
  const complete = (result) => {
    if (completed) {
      console.error('Invocation has already been reported as done. Cannot call complete more than once per '
        + 'invocation.');
      return;
    }
    completed = true;
    respond(started, result);
    scheduleNext();
  };
  const postError = (err) => {
    logError('Invoke Error', err);
    respondError(started, err);
    scheduleNext();
  };
  const once = (fn) => (...args) => {
    if (!finished) {
      fn(...args);
      finished = true;
    }
  };
  const done = (err, result) => {
    beforeExit = () => {};
    if (err !== undefined && err !== null) postError(err);
    else complete(result);
  };
  const callback = (err, result) => {
    beforeExit = () => {};
    if (err !== undefined && err !== null) postError(err);
    else if (!waitForEmptyEventLoop) complete(result);
    else beforeExit = () => setImmediate(() => complete(result));
  };
  const context = {
    get callbackWaitsForEmptyEventLoop() { return waitForEmptyEventLoop; },
    set callbackWaitsForEmptyEventLoop(value) { waitForEmptyEventLoop = value; },
    succeed: once((result) => done(null, result)),
    fail: once((err) => (err === undefined || err === null ? done('handled') : done(err, null))),
    done: once(done),
  };
  return [once(callback), context, () => { completed = true; }, (err) => context.fail(err)];
}

// The invocation's X-Ray trace header in _X_AMZN_TRACE_ID, as AWS's runtime forwards it before each
// invocation (InvokeContext._forwardXRay; removed when there is none): the JS SDK sends it with every
// call the handler makes (middleware-recursion-detection), which is how Lambda follows a chain.
function forwardTraceId(traceId) {
  if (traceId) process.env._X_AMZN_TRACE_ID = traceId;
  else delete process.env._X_AMZN_TRACE_ID;
}

function invoke(handler, isAsync, header, body) {
  globalThis[REQUEST_ID] = header.id;
  forwardTraceId(header.trace);
  current = { answered: false };
  const started = performance.now();
  const scheduleNext = () => setImmediate(next);
  const fail = (exitCode) => (err) => {
    if (!current.answered) respondError(started, err, exitCode);
    process.exit(exitCode);
  };
  onUncaught = { exception: fail(129), rejection: fail(128) };
  if (handler[STREAMING]) {
    const err = runtimeError('MalformedStreamingHandler', 'kinesim does not stream responses '
      + '(InvokeWithResponseStream): remove awslambda.streamifyResponse or invoke a function that returns its result.');
    logError('Invoke Error', err);
    respondError(started, err);
    scheduleNext();
    return;
  }
  if (!CALLBACKS) {
    // RIC v4: the handler's promise (or value) is the result; nothing waits for the event loop.
    // A promise that never settles leaves the loop empty: answered as up to 22 (Runtime.NodeJsExit).
    const context = buildContext(header, {});
    beforeExit = () => {
      beforeExit = () => {};
      neverSettled(started);
      scheduleNext();
    };
    (async () => handler(JSON.parse(body.toString('utf8')), context))().then((result) => {
      beforeExit = () => {};
      try {
        respond(started, result);
      } catch (err) {
        logError('Invoke Error', err);
        respondError(started, err);
      }
      scheduleNext();
    }, (err) => {
      beforeExit = () => {};
      logError('Invoke Error', err);
      respondError(started, err);
      scheduleNext();
    });
    return;
  }
  const [callback, cbContext, markCompleted, failWith] = callbackContext(started, scheduleNext);
  // the handler returned and never called back: an async one never settled (Runtime.NodeJsExit), a
  // plain one's result is null, as on AWS
  beforeExit = () => {
    markCompleted();
    beforeExit = () => {};
    if (isAsync) {
      neverSettled(started);
    } else {
      respond(started, null);
    }
    scheduleNext();
  };
  try {
    const context = buildContext(header, cbContext);
    const result = handler(JSON.parse(body.toString('utf8')), context, callback);
    if (result && typeof result.then === 'function') {
      result.then(cbContext.succeed, cbContext.fail).catch(failWith);
    }
  } catch (err) {
    callback(err);
  }
}

let handler = null;
let handlerIsAsync = false;

function next() {
  const message = receive();
  if (message === null) process.exit(0); // the server closed the channel: this environment is retired
  invoke(handler, handlerIsAsync, ...message);
}

process.on('beforeExit', () => beforeExit());
process.on('uncaughtException', (error) => {
  logError('Uncaught Exception', error);
  onUncaught?.exception(error);
});
process.on('unhandledRejection', (reason) => {
  const error = runtimeError('UnhandledPromiseRejection', reason);
  error.reason = reason;
  logError('Unhandled Promise Rejection', error);
  onUncaught?.rejection(error);
});

// A handler waiting on I/O never reads the closed channel: leave if the server is gone.
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) process.reallyExit(1);
  drainOutput(); // a subprocess's output while the handler awaits
}, 200).unref();

// --- init ----------------------------------------------------------------------------------------------

const initFailed = (code) => (err) => {
  const response = toResponse(err);
  flushOutput();
  send({ t: 'init', error: response.errorType || 'Unhandled', rss_kb: rssKb() }, Buffer.from(JSON.stringify(response)));
  process.exit(code);
};
onUncaught = { exception: initFailed(129), rejection: initFailed(128) };
// ES module imports search NODE_PATH too (layers, the runtime's AWS SDK), as in AWS's runtime
const nodePath = (process.env.NODE_PATH || '').split(path.delimiter).filter(Boolean);
if (nodePath.length && module.registerHooks) {
  module.registerHooks(syncHooks(nodePath));
} else if (nodePath.length && module.register) {
  module.register('./node_path_hooks.mjs', import.meta.url, { data: { directories: nodePath } });
}
try {
  handler = await loadHandler(process.env.LAMBDA_TASK_ROOT || process.cwd(), process.env._HANDLER || '');
  handlerIsAsync = handler.constructor?.name === 'AsyncFunction';
  if (!CALLBACKS && handler.length >= 3 && !handler[STREAMING]) {
    throw runtimeError('CallbackHandlerDeprecated', 'ERROR: AWS Lambda has removed support for callback-based '
      + 'function handlers starting with Node.js 24. You need to modify this function to use a supported handler '
      + 'signature to use Node.js 24 or later. For more information see '
      + 'https://docs.aws.amazon.com/lambda/latest/dg/nodejs-handler.html.');
  }
  if (CALLBACKS && handler.length === 3 && !handlerIsAsync && !handler[STREAMING]
      && process.env.AWS_LAMBDA_NODEJS_DISABLE_CALLBACK_WARNING === undefined) {
    console.warn('AWS Lambda plans to remove support for callback-based function handlers starting with Node.js 24. '
      + 'You will need to update this function to use an async handler to use Node.js 24 or later. For more '
      + 'information and to provide feedback on this change, see '
      + 'https://github.com/aws/aws-lambda-nodejs-runtime-interface-client/issues/137. To disable this warning, set '
      + 'the AWS_LAMBDA_NODEJS_DISABLE_CALLBACK_WARNING environment variable.');
  }
} catch (err) {
  // AWS logs an init failure as an uncaught exception of the runtime
  logError('Uncaught Exception', err);
  initFailed(129)(err);
}
onUncaught = null;
flushOutput();
send({ t: 'init', error: null, rss_kb: rssKb() });
setImmediate(next);
