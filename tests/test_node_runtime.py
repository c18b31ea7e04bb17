"""Node.js functions through the real server with boto3: AWS's Node.js handler contract (CommonJS,
ES modules, async handlers, callbacks up to nodejs22.x, `context`), its error shapes and log lines,
timeouts and crashed runtimes, node_modules and layers, the JS SDK v3 inside a handler reaching
kinesim, and a Node.js handler fed by a Kinesis event source mapping.

Handlers live in tests/functions/node_*/. The Node.js versions (24 and 22, exactly the majors AWS
runs nodejs24.x and nodejs22.x on) come from the npm registry into the project's node cache, once.
"""
from __future__ import annotations

import base64
import io
import json
import os
import re
import urllib.request
import uuid
import zipfile
from collections import defaultdict
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from conftest import client_for
from kinesim.functions import runtimes
from kinesim.functions.logs import FunctionLogs
from kinesim.functions.runtime import FunctionRuntime
from npm_setup import NPM, ensure_node_modules
from test_mappings_e2e import ROLE, Seen, map_stream, read_stream, result_of, running, stream_arn, wait_until

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "functions"
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\t(?P<id>[0-9a-f-]{36}|undefined)\t"
                      r"(?P<level>INFO|WARN|ERROR|DEBUG|TRACE|FATAL)\t(?P<message>.*)$", re.S)

pytestmark = pytest.mark.skipif(NPM is None, reason="npm is needed to install Node.js from the npm registry")


@pytest.fixture(scope="session")
def node_majors():
    """Node.js 24 and 22 in the node cache (the server finds them there)."""
    return {major: runtimes.install(major, quiet=True) for major in (24, 22)}


@pytest.fixture(scope="module")
def lam(server, node_majors):
    return client_for(server.url, "lambda")


def package(directory: Path, extra: dict[str, str] | None = None) -> bytes:
    """A .zip of a fixture directory, plus `extra` files (path -> text)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                z.write(path, path.relative_to(directory).as_posix())
        for name, text in (extra or {}).items():
            z.writestr(name, text)
    return buf.getvalue()


@pytest.fixture
def make_function(lam):
    """make_function(handler, fixture dir name or zip bytes, runtime=..., **settings) -> name;
    deleted afterwards, with their mappings."""
    names = []

    def make(handler: str, code: str | bytes = "node_cjs", runtime: str = "nodejs24.x", **settings) -> str:
        name = "node-" + uuid.uuid4().hex[:10]
        if isinstance(code, bytes):
            source = {"ZipFile": code}
        elif code.startswith("/"):  # run in place from a local directory
            source = {"S3Bucket": "hot-reload", "S3Key": code}
        else:
            source = {"ZipFile": package(FIXTURES / code)}
        lam.create_function(FunctionName=name, Runtime=runtime, Role=ROLE, Handler=handler, Code=source,
                            Timeout=settings.pop("Timeout", 10), **settings)
        names.append(name)
        return name
    yield make
    for name in names:
        for m in lam.list_event_source_mappings(FunctionName=name)["EventSourceMappings"]:
            lam.delete_event_source_mapping(UUID=m["UUID"])
        lam.delete_function(FunctionName=name)


def invoke(lam, name: str, event=None, **kw) -> tuple[dict | str | None, dict]:
    out = lam.invoke(FunctionName=name, Payload=json.dumps(event if event is not None else {}).encode(),
                     LogType="Tail", **kw)
    out["log"] = base64.b64decode(out.get("LogResult", "")).decode()
    return json.loads(out["Payload"].read()), out


def log_events(server, name: str) -> list[str]:
    """A function's log events (messages), oldest first."""
    with urllib.request.urlopen(f"{server.url}/_kinesim/logs/{name}", timeout=10) as r:
        return [e["message"] for e in json.loads(r.read())["events"]]


def log_lines(events: list[str]) -> list[re.Match]:
    """The console lines among log events, parsed."""
    return [m for m in (LOG_LINE.match(e.removesuffix("\n")) for e in events) if m]


# 1. which runtimes run ---------------------------------------------------------------------------


@pytest.mark.parametrize("runtime, hint", [
    ("java21", "not Java"), ("dotnet8", "not .NET"), ("provided.al2023", "OS-only"), ("ruby3.3", "not Ruby"),
    ("go1.x", "not Go"), ("nodejs4.3", "Node.js 18 and later"), ("python2.7", "python3.*")])
def test_runtimes_that_cannot_run_here_are_refused_before_anything_is_created(lam, runtime, hint):
    name = "node-" + uuid.uuid4().hex[:10]
    with pytest.raises(ClientError) as e:
        lam.create_function(FunctionName=name, Runtime=runtime, Role=ROLE, Handler="index.handler",
                            Code={"ZipFile": package(FIXTURES / "node_cjs")})
    err = e.value.response["Error"]
    assert err["Code"] == "InvalidParameterValueException"
    assert err["Message"].startswith(f"The runtime parameter of {runtime} is not supported by kinesim")
    assert hint in err["Message"]
    assert ("python3.13" if runtime.startswith("python") else "nodejs24.x") in err["Message"]  # what to use instead
    with pytest.raises(ClientError) as e:
        lam.get_function(FunctionName=name)
    assert e.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_a_node_version_not_installed_is_refused_with_how_to_install_it(lam, make_function):
    missing = [m for m in (18, 26, 22, 24) if m not in runtimes.installed_node_majors()]
    if not missing:
        pytest.skip("every Node.js major in the model is installed here")
    runtime = f"nodejs{missing[0]}.x"
    name = make_function("index.pid", runtime="nodejs24.x")
    with pytest.raises(ClientError) as e:
        lam.update_function_configuration(FunctionName=name, Runtime=runtime)
    err = e.value.response["Error"]
    assert err["Code"] == "InvalidParameterValueException"
    assert f"python -m kinesim.functions.runtimes install {missing[0]}" in err["Message"]
    assert lam.get_function_configuration(FunctionName=name)["Runtime"] == "nodejs24.x"


def test_health_lists_the_runtimes_this_server_runs(server, node_majors):
    with urllib.request.urlopen(f"{server.url}/_kinesim/health", timeout=10) as r:
        listed = json.loads(r.read())["runtimes"]
    assert {"nodejs24.x", "nodejs22.x", "python3.12", "python3.13"} <= set(listed)
    assert not any(r.startswith(("java", "dotnet", "provided", "ruby", "go")) for r in listed)


# 2. the handler contract ----------------------------------------------------------------------


def test_commonjs_handler_sees_awss_context_environment_and_log_format(lam, make_function, server):
    name = make_function("index.describe", Environment={"Variables": {"STAGE": "test"}}, MemorySize=256)
    context = base64.b64encode(json.dumps({"custom": {"k": "v"}, "env": {"e": 1}}).encode()).decode()
    out, raw = invoke(lam, name, {"n": 1}, ClientContext=context)
    assert "FunctionError" not in raw
    request_id = raw["ResponseMetadata"]["RequestId"]
    assert out["event"] == {"n": 1} and out["awsRequestId"] == request_id
    # nodejs24.x: AWS's RIC v4 context, without the callback-era members
    assert out["members"] == sorted(["awsRequestId", "clientContext", "functionName", "functionVersion",
                                     "getRemainingTimeInMillis", "identity", "invokedFunctionArn", "logGroupName",
                                     "logStreamName", "memoryLimitInMB", "tenantId"])
    assert out["functionName"] == name and out["functionVersion"] == "$LATEST"
    assert out["invokedFunctionArn"] == f"arn:aws:lambda:us-east-1:000000000000:function:{name}"
    assert out["memoryLimitInMB"] == "256"  # a string, read from the environment as AWS's runtime does
    assert out["logGroupName"] == f"/aws/lambda/{name}"
    assert re.fullmatch(r"\d{4}/\d\d/\d\d/\[\$LATEST\][0-9a-f]{32}", out["logStreamName"])
    assert 8000 < out["remainingMs"] <= 10000
    assert out["clientContext"] == {"custom": {"k": "v"}, "env": {"e": 1}}
    assert out["node"].split(".")[0] == "24" and out["helper"] == "helper"
    env = out["env"]
    assert env["STAGE"] == "test" and env["AWS_EXECUTION_ENV"] == "AWS_Lambda_nodejs24.x"
    assert env["AWS_ENDPOINT_URL"] == server.url and env["AWS_REGION"] == "us-east-1"
    assert env["_HANDLER"] == "index.describe" and env["LAMBDA_TASK_ROOT"] == out["cwd"]
    assert env["AWS_ACCESS_KEY_ID"] and env["AWS_SECRET_ACCESS_KEY"]
    assert env["NODE_PATH"].split(os.pathsep)[-1] == out["cwd"]
    events = log_events(server, name)
    assert [(m["id"], m["level"], m["message"]) for m in log_lines(events)] == [
        ("undefined", "INFO", "init: loading index"),  # init code runs before any request, as on AWS
        (request_id, "INFO", "describe got { n: 1 }"), (request_id, "WARN", "multi\nline")]  # one event
    assert "raw stdout line\n" in events and "from a subprocess\n" in events  # process.stdout and fd 1
    assert events[1] == f"START RequestId: {request_id} Version: $LATEST\n"
    assert events[-1].startswith(f"REPORT RequestId: {request_id}\tDuration: ")
    # warm: the same process, init ran once
    again, _ = invoke(lam, name)
    assert again["pid"] == out["pid"] == out["initPid"] and again["invocations"] == 2


def test_es_modules_and_package_type_module(lam, make_function):
    out, _ = invoke(lam, make_function("index.handler", "node_esm"), {"a": 1})
    assert out["kind"] == "esm" and out["helper"] == "esm-helper" and out["started"] == "top-level await works"
    out, _ = invoke(lam, make_function("app.handler", "node_typemodule"), {"b": 2})
    assert out == {"kind": "type-module", "isModule": True, "event": {"b": 2}}


def test_es_module_syntax_in_a_js_file_needs_type_module_on_nodejs22_as_on_aws(lam, make_function):
    # Lambda turns off Node.js 22's module detection and require() of ES modules unless NODE_OPTIONS
    # turns them back on (lambda-nodejs.html); Node.js 24's runtime has no such flags. (The runtime
    # require()s a .js outside a "type": "module" package, as AWS's runtime interface client does.)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("index.js", "export const handler = async () => 'esm without type module';\n")
    code = buf.getvalue()
    error, _ = invoke(lam, make_function("index.handler", code, runtime="nodejs22.x"))
    assert error["errorType"] == "Runtime.UserCodeSyntaxError", error
    out, _ = invoke(lam, make_function("index.handler", code, runtime="nodejs22.x", Environment={
        "Variables": {"NODE_OPTIONS": "--experimental-detect-module --experimental-require-module"}}))
    assert out == "esm without type module"
    out, _ = invoke(lam, make_function("index.handler", code, runtime="nodejs24.x"))
    assert out == "esm without type module"


def test_callback_handlers_up_to_nodejs22(lam, make_function):
    name = make_function("index.callback", runtime="nodejs22.x")
    waited, raw = invoke(lam, name)  # callbackWaitsForEmptyEventLoop: the result waits for the timer
    assert waited == {"timerRan": True}
    assert "AWS Lambda plans to remove support for callback-based function handlers" in raw["log"]
    fast, _ = invoke(lam, name, {"wait": False})
    assert fast == {"timerRan": False}
    error, raw = invoke(lam, make_function("index.callbackError", runtime="nodejs22.x"), {"n": 5})
    assert raw["FunctionError"] == "Unhandled"
    assert (error["errorType"], error["errorMessage"]) == ("TypeError", "bad callback input: 5")
    out, _ = invoke(lam, make_function("index.succeed", runtime="nodejs22.x"))
    assert out == {"via": "succeed"}
    out, _ = invoke(lam, make_function("index.syncReturn", runtime="nodejs22.x"))
    assert out is None  # a plain handler that neither returns a promise nor calls back: null, as on AWS
    members, _ = invoke(lam, make_function("index.describe", runtime="nodejs22.x"))
    assert {"callbackWaitsForEmptyEventLoop", "succeed", "fail", "done"} <= set(members["members"])
    assert members["waits"] is True and members["node"].split(".")[0] == "22"


def test_callback_handlers_fail_init_from_nodejs24(lam, make_function):
    error, raw = invoke(lam, make_function("index.callback", "node_esm"))
    assert raw["FunctionError"] == "Unhandled"
    assert error["errorType"] == "Runtime.CallbackHandlerDeprecated"
    assert error["errorMessage"].startswith("ERROR: AWS Lambda has removed support for callback-based function "
                                            "handlers starting with Node.js 24.")
    assert "INIT_REPORT Init Duration" in raw["log"] and "Error Type: Runtime.CallbackHandlerDeprecated" in raw["log"]


def test_errors_in_awss_node_shape(lam, make_function, server):
    name = make_function("index.fail")
    error, raw = invoke(lam, name, {"n": 7})
    assert raw["FunctionError"] == "Unhandled"
    assert list(error) == ["errorType", "errorMessage", "trace"]
    assert (error["errorType"], error["errorMessage"]) == ("RangeError", "bad input: 7")
    assert error["trace"][0] == "RangeError: bad input: 7" and "index.js" in error["trace"][1]
    [logged] = [m for m in log_lines(log_events(server, name)) if m["level"] == "ERROR"]
    label, _, body = logged["message"].partition("\t")
    assert label == "Invoke Error "
    assert json.loads(body)["code"] == "E_BAD" and json.loads(body)["stack"][0] == "RangeError: bad input: 7"

    error, _ = invoke(lam, make_function("index.throwString"))
    assert error == {"errorType": "string", "errorMessage": "just a string", "trace": []}
    error, _ = invoke(lam, make_function("index.missing"))
    assert (error["errorType"], error["errorMessage"]) == ("Runtime.HandlerNotFound",
                                                           "index.missing is undefined or not exported")
    error, _ = invoke(lam, make_function("nope.handler"))
    assert error["errorType"] == "Runtime.ImportModuleError"
    assert error["errorMessage"] == "Error: Cannot find module 'nope'\nRequire stack:\n- /var/runtime/index.mjs"
    error, raw = invoke(lam, make_function("missing_dep.handler", "node_broken"))
    assert error["errorType"] == "Runtime.ImportModuleError"
    assert error["errorMessage"].startswith("Error: Cannot find module 'not-a-package-anywhere'")
    assert "Uncaught Exception" in raw["log"] and "Phase: invoke\tStatus: error" in raw["log"]
    error, _ = invoke(lam, make_function("syntax.handler", "node_broken"))
    assert error["errorType"] == "Runtime.UserCodeSyntaxError"
    error, _ = invoke(lam, make_function("index.never"))
    assert error["errorType"] == "Runtime.NodeJsExit"


def test_timeout_kills_the_environment_and_the_next_invoke_gets_a_new_one(lam, make_function):
    name = make_function("index.sleep", Timeout=1)
    first, _ = invoke(lam, name, {"seconds": 0})
    error, raw = invoke(lam, name, {"seconds": 30})
    request_id = raw["ResponseMetadata"]["RequestId"]
    assert raw["FunctionError"] == "Unhandled"
    assert error == {"errorMessage": f"RequestId: {request_id} Error: Task timed out after 1.00 seconds",
                     "errorType": "Sandbox.Timedout"}
    assert "sleeping 30" in raw["log"] and "Status: timeout" in raw["log"]
    second, _ = invoke(lam, name, {"seconds": 0})
    assert second["pid"] != first["pid"]


def test_crashes_get_a_fresh_environment(lam, make_function):
    name = make_function("index.exit")
    error, raw = invoke(lam, name, {"code": 3})
    request_id = raw["ResponseMetadata"]["RequestId"]
    assert error == {"errorType": "Runtime.ExitError",
                     "errorMessage": f"RequestId: {request_id} Error: Runtime exited with error: exit status 3"}
    # an exception thrown outside the handler's promise: the invocation fails, the runtime exits (129)
    name = make_function("index.uncaught", runtime="nodejs22.x")
    error, raw = invoke(lam, name)
    assert (error["errorType"], error["errorMessage"]) == ("Error", "thrown from a timer")
    assert "Uncaught Exception" in raw["log"] and "exit status 129\nRuntime.ExitError" in raw["log"]
    again, raw = invoke(lam, name)  # a new environment, which fails the same way (not a dead one's EOF)
    assert again["errorMessage"] == "thrown from a timer"


def test_response_limits(lam, make_function):
    name = make_function("index.big")
    error, raw = invoke(lam, name, {"size": 7 * 1024 * 1024})
    assert raw["FunctionError"] == "Unhandled" and error["errorType"] == "Function.ResponseSizeTooLarge"
    ok, _ = invoke(lam, name, {"size": 1000})
    assert ok == "x" * 1000
    error, _ = invoke(lam, make_function("index.circular"))
    assert (error["errorType"], error["errorMessage"]) == ("Error", "Unable to stringify response body")


# 3. dependencies: the function's node_modules, layers, the JS SDK v3 --------------------------------


GREETER = {
    "node_modules/greeter/package.json": json.dumps({"name": "greeter", "main": "lib/main.js"}),
    "node_modules/greeter/lib/main.js": "exports.greet = (who) => `hello ${who} from the package`;\n",
    "index.js": "const { greet } = require('greeter');\nexports.handler = async (e) => greet(e.who);\n",
    "esm.mjs": "import { greet } from 'greeter';\nexport const handler = async (e) => greet(e.who);\n",
}


def test_the_functions_own_node_modules(lam, make_function):
    code = package(FIXTURES / "node_esm", GREETER)
    out, _ = invoke(lam, make_function("index.handler", code), {"who": "cjs"})
    assert out == "hello cjs from the package"
    out, _ = invoke(lam, make_function("esm.handler", code), {"who": "esm"})
    assert out == "hello esm from the package"


def _layer(root: Path, files: dict[str, str]) -> str:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return str(root)


def test_layer_directories_on_the_path_as_awss_opt(tmp_path):
    """runtime.invoke's LayerDirs contract (the layers API extracts them): /opt/nodejs/node_modules,
    /opt/nodejs/nodeNN/node_modules and /opt/python equivalents, after the function's own code."""
    runtimes.install(24, quiet=True)
    first = _layer(tmp_path / "l1", {"nodejs/node_modules/shared/index.js": "module.exports = 'layer 1';\n",
                                      "nodejs/node_modules/only1/index.js": "module.exports = 'only in 1';\n",
                                      "python/shared_mod.py": "WHO = 'layer 1'\n"})
    second = _layer(tmp_path / "l2", {"nodejs/node24/node_modules/shared/index.js": "module.exports = 'layer 2';\n",
                                      # the function's runtime's version, as on AWS (not the server's)
                                      "python/lib/python3.12/site-packages/shared_mod.py": "WHO = 'layer 2'\n"})
    code = _layer(tmp_path / "code", {
        "index.js": "exports.handler = async () => [require('shared'), require('only1'), require('own_mod')];\n",
        "node_modules/own_mod/index.js": "module.exports = 'the function';\n",
        "app.py": "import shared_mod\ndef handler(e, c):\n    return shared_mod.WHO\n"})
    logs = FunctionLogs(str(tmp_path / "logs"))
    rt = FunctionRuntime(logs, "http://127.0.0.1:1", "us-east-1", "000000000000")
    try:
        for runtime, handler, expected in (("nodejs24.x", "index.handler", ["layer 2", "only in 1", "the function"]),
                                           ("python3.12", "app.handler", "layer 2")):
            fn = {"FunctionName": "layered", "Runtime": runtime, "Handler": handler, "CodeDir": code, "Timeout": 10,
                  "Version": "3", "LayerDirs": [first, second]}
            result = rt.invoke(fn, b"{}")
            assert json.loads(result.payload) == expected, result.payload
    finally:
        rt.close()


def test_js_sdk_v3_inside_a_handler_reaches_kinesim(lam, make_function, kinesis, make_stream, tmp_path):
    sdk = HERE / "node"
    ensure_node_modules(sdk)
    code = tmp_path / "code"
    code.mkdir()
    (code / "node_modules").symlink_to(sdk / "node_modules")  # run in place: no 18 MB package to zip
    (code / "index.mjs").write_text(
        "import { KinesisClient, PutRecordCommand } from '@aws-sdk/client-kinesis';\n"
        "const client = new KinesisClient({});  // endpoint, region, credentials: all from the environment\n"
        "export const handler = async (event) => {\n"
        "  const out = await client.send(new PutRecordCommand({StreamName: event.stream,\n"
        "    Data: new TextEncoder().encode('from node'), PartitionKey: 'k'}));\n"
        "  return { shard: out.ShardId, seq: out.SequenceNumber };\n"
        "};\n")
    stream = make_stream()
    out, raw = invoke(lam, make_function("index.handler", str(code), Timeout=30), {"stream": stream})
    assert "FunctionError" not in raw, out
    [record] = read_stream(kinesis, stream)
    assert record["Data"] == b"from node" and record["SequenceNumber"] == out["seq"]


# 4. a Node.js handler fed by a Kinesis stream ----------------------------------------------------

# The same contract as test_mappings_e2e.HANDLER: record every event it is sent; data "poison..."
# raises, "report-once..." is reported in batchItemFailures the first time, "sleep-once..." sleeps
# past the timeout the first time.
MAPPED_HANDLER = r"""
const fs = require('fs');
const path = require('path');

function firstTime(tag) {
  try {
    fs.closeSync(fs.openSync(path.join(process.env.STATE_DIR, tag), 'wx'));
    return true;
  } catch (e) {
    if (e.code === 'EEXIST') return false;
    throw e;
  }
}

exports.handler = async (event, context) => {
  fs.appendFileSync(process.env.SEEN_FILE, JSON.stringify({ at: Date.now() / 1000, pid: process.pid,
    request_id: context.awsRequestId, event }) + '\n');
  const batchItemFailures = [];
  for (const record of event.Records) {
    const data = Buffer.from(record.kinesis.data, 'base64').toString('latin1');
    const seq = record.kinesis.sequenceNumber;
    if (data.startsWith('poison')) throw new Error('poison record ' + seq);
    if (data.startsWith('sleep-once') && firstTime(seq)) await new Promise((r) => setTimeout(r, 60000));
    if (data.startsWith('report-once') && firstTime(seq)) batchItemFailures.push({ itemIdentifier: seq });
  }
  return { batchItemFailures };
};
"""


@pytest.fixture
def mapped(make_function, tmp_path):
    """mapped(**settings) -> (name, Seen): the recording Node.js function."""
    def make(**settings) -> tuple[str, Seen]:
        state = tmp_path / uuid.uuid4().hex[:8]
        state.mkdir()
        seen = str(state / "seen.jsonl")
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("index.js", MAPPED_HANDLER)
        name = make_function("index.handler", buf.getvalue(),
                             Environment={"Variables": {"SEEN_FILE": seen, "STATE_DIR": str(state)}}, **settings)
        return name, Seen(seen)
    return make


def test_stream_records_reach_a_node_handler_once_and_in_order_per_shard(lam, kinesis, make_stream, mapped):
    name, seen = mapped()
    stream = make_stream(4)
    map_stream(lam, stream, name, BatchSize=100)
    put = {}
    entries = [{"Data": b"r%d" % i, "PartitionKey": f"key-{i % 40}"} for i in range(400)]
    out = kinesis.put_records(StreamName=stream, Records=entries)
    assert out["FailedRecordCount"] == 0
    for entry, result in zip(entries, out["Records"]):
        put[result["SequenceNumber"]] = (result["ShardId"], entry["Data"])
    wait_until(lambda: len(seen.records()) >= 400, timeout=60, what="400 records")
    records = seen.records()
    assert sorted(r["kinesis"]["sequenceNumber"] for r in records) == sorted(put)  # each once
    by_shard = defaultdict(list)
    for r in records:
        seq = r["kinesis"]["sequenceNumber"]
        assert r["eventSource"] == "aws:kinesis" and r["eventSourceARN"] == stream_arn(stream)
        assert r["eventID"] == f"{put[seq][0]}:{seq}" and base64.b64decode(r["kinesis"]["data"]) == put[seq][1]
        by_shard[put[seq][0]].append(int(seq))
    assert len(by_shard) == 4
    for shard, seqs in by_shard.items():
        assert seqs == sorted(seqs), shard


def test_a_failing_node_handler_is_retried_then_skipped_to_the_destination(lam, kinesis, make_stream, mapped):
    name, seen = mapped()
    stream, dlq = make_stream(), make_stream()
    mapping = map_stream(lam, stream, name, BatchSize=1, MaximumRetryAttempts=2,
                         DestinationConfig={"OnFailure": {"Destination": stream_arn(dlq)}})
    for data in (b"ok-1", b"poison", b"ok-2"):
        kinesis.put_record(StreamName=stream, Data=data, PartitionKey="k")
    wait_until(lambda: seen.batches()[-1:] == [[b"ok-2"]], timeout=60, what="the record after the poison one")
    assert seen.batches() == [[b"ok-1"], [b"poison"], [b"poison"], [b"poison"], [b"ok-2"]]
    [failure] = read_stream(kinesis, dlq)
    record = json.loads(failure["Data"])
    assert record["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert record["responseContext"]["functionError"] == "Unhandled"
    wait_until(lambda: result_of(lam, mapping["UUID"]) == "OK", timeout=60, what="OK after the last batch")


def test_partial_batch_failure_from_a_node_handler(lam, kinesis, make_stream, mapped):
    name, seen = mapped()
    stream = make_stream()
    kinesis.put_records(StreamName=stream, Records=[
        {"Data": b"report-once-%d" % i if i in (4, 7) else b"%d" % i, "PartitionKey": "k"} for i in range(10)])
    mapping = map_stream(lam, stream, name, FunctionResponseTypes=["ReportBatchItemFailures"])
    full = [b"0", b"1", b"2", b"3", b"report-once-4", b"5", b"6", b"report-once-7", b"8", b"9"]
    # 4 and 7 are reported: the retry starts at the lowest one; 0-3 are not sent again
    wait_until(lambda: seen.batches() == [full, full[4:]], timeout=60, what="the retry from the reported record")
    wait_until(lambda: result_of(lam, mapping["UUID"]) == "OK", timeout=60, what="OK")
    assert seen.batches() == [full, full[4:]]


def test_a_timed_out_node_batch_is_retried_on_a_new_environment(lam, kinesis, make_stream, mapped):
    name, seen = mapped(Timeout=1)
    stream = make_stream()
    map_stream(lam, stream, name, BatchSize=1, MaximumRetryAttempts=3)
    for data in (b"before", b"sleep-once", b"after"):
        kinesis.put_record(StreamName=stream, Data=data, PartitionKey="k")
    wait_until(lambda: seen.batches()[-1:] == [[b"after"]], timeout=60, what="the record after the timeout")
    invocations = seen.invocations()
    assert seen.batches() == [[b"before"], [b"sleep-once"], [b"sleep-once"], [b"after"]]
    assert invocations[0]["pid"] == invocations[1]["pid"] != invocations[2]["pid"] == invocations[3]["pid"]


def test_versions_have_environments_of_their_own_and_retire_stops_them_all(tmp_path):
    """The contract with versions: pools by (FunctionName, Version); retire(name) ends every version's."""
    runtimes.install(24, quiet=True)
    rt = FunctionRuntime(FunctionLogs(str(tmp_path / "logs")), "http://127.0.0.1:1", "us-east-1", "000000000000")
    try:
        base = {"FunctionName": "versioned", "Runtime": "nodejs24.x", "Handler": "index.pid",
                "CodeDir": str(FIXTURES / "node_cjs"), "Timeout": 10}
        pids = {version: json.loads(rt.invoke({**base, "Version": version}, b"{}").payload)["pid"]
                for version in ("$LATEST", "1", "2")}
        assert len(set(pids.values())) == 3
        assert json.loads(rt.invoke({**base, "Version": "1"}, b"{}").payload)["pid"] == pids["1"]  # warm
        rt.retire("versioned")
        wait_until(lambda: not any(running(pid) for pid in pids.values()), timeout=30,
                   what="every version's worker to stop")
        assert json.loads(rt.invoke({**base, "Version": "1"}, b"{}").payload)["pid"] not in pids.values()
    finally:
        rt.close()
