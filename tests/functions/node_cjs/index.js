// Handlers for tests/test_node_runtime.py (CommonJS): one code directory, one function per handler.
const { execSync } = require('child_process');
const helper = require('./helper');

const INIT_PID = process.pid;
let invocations = 0;
console.log('init: loading index');

// What the handler sees: its context, environment and process.
exports.describe = async (event, context) => {
  invocations += 1;
  console.log('describe got', event);
  console.warn('multi\nline');
  process.stdout.write('raw stdout line\n');
  execSync('echo from a subprocess', { stdio: 'inherit' });
  const members = Object.keys(context).sort();
  return {
    event,
    members,
    awsRequestId: context.awsRequestId,
    functionName: context.functionName,
    functionVersion: context.functionVersion,
    invokedFunctionArn: context.invokedFunctionArn,
    memoryLimitInMB: context.memoryLimitInMB,
    logGroupName: context.logGroupName,
    logStreamName: context.logStreamName,
    remainingMs: context.getRemainingTimeInMillis(),
    waits: context.callbackWaitsForEmptyEventLoop,
    clientContext: context.clientContext ?? null,
    identity: context.identity ?? null,
    env: process.env,
    cwd: process.cwd(),
    node: process.versions.node,
    helper: helper.NAME,
    pid: process.pid,
    initPid: INIT_PID,
    invocations,
  };
};

// A callback handler: the result waits for the event loop to empty (the timer) unless told not to.
exports.callback = (event, context, callback) => {
  context.callbackWaitsForEmptyEventLoop = event.wait !== false;
  const state = { timerRan: false };
  setTimeout(() => { state.timerRan = true; console.log('timer ran'); }, 300);
  callback(null, state);
};

exports.callbackError = (event, context, callback) => {
  callback(new TypeError('bad callback input: ' + event.n));
};

exports.succeed = (event, context) => {
  context.succeed({ via: 'succeed' });
};

// A plain (non-async) handler that returns without calling back: AWS's runtime answers null.
exports.syncReturn = (event) => ({ ignored: true });

exports.fail = async (event) => {
  const error = new RangeError('bad input: ' + event.n);
  error.code = 'E_BAD';
  throw error;
};

exports.throwString = async () => {
  throw 'just a string';
};

exports.never = async () => new Promise(() => {});

exports.sleep = async (event) => {
  console.log('sleeping ' + event.seconds);
  await new Promise((resolve) => setTimeout(resolve, event.seconds * 1000));
  return { pid: process.pid };
};

exports.exit = async (event) => {
  process.exit(event.code);
};

exports.uncaught = (event, context, callback) => {
  setTimeout(() => { throw new Error('thrown from a timer'); }, 0);
};

exports.pid = async () => ({ pid: process.pid });

exports.big = async (event) => 'x'.repeat(event.size);

exports.circular = async () => {
  const a = {};
  a.self = a;
  return a;
};

exports.notAFunction = 42;
