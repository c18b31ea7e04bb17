"""The runtime environment AWS gives a function, through a real server and boto3: a Python handler
sees the standard library, the boto3 & co AWS's runtime includes, its own package and its layers,
and nothing of kinesim's venv; a python3.X function runs on a Python 3.X, or the closest one with a
warning first in its log; a no-op's REPORT counts the worker's own memory; Node.js handlers import
the AWS SDK for JavaScript v3 without bundling it, by require and by import, after their own
node_modules and layers."""
from __future__ import annotations

import base64
import io
import json
import os
import re
import sys
import urllib.request
import uuid
import zipfile
from pathlib import Path

import pytest

from conftest import client_for, start_server
from kinesim.functions import python_sdk, runtime_sdks, runtimes
from kinesim.server import free_port
from npm_setup import NPM, NPM_TIMEOUT_S

ROLE = "arn:aws:iam::000000000000:role/any"
MEMORY = re.compile(r"Max Memory Used: (\d+) MB")
SERVER_MINOR = sys.version_info.minor
pytestmark = pytest.mark.timeout(NPM_TIMEOUT_S + 240)  # a first run installs Node.js 22 and the JS SDK


@pytest.fixture(scope="module")
def leaky_dir(tmp_path_factory) -> Path:
    """A directory on the server's PYTHONPATH, with a module no function may import."""
    path = tmp_path_factory.mktemp("server-pythonpath")
    (path / "leaky_module.py").write_text("WHERE = 'the server'\n")
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory, leaky_dir):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", str(leaky_dir))
        proc = start_server(tmp_path_factory)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def lam(server):
    return client_for(server.url, "lambda")


@pytest.fixture(scope="module")
def kinesis(server):
    return client_for(server.url, "kinesis")


def zip_of(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return buf.getvalue()


@pytest.fixture
def make_function(lam):
    names = []

    def make(files: dict[str, str], handler: str = "app.handler", runtime: str = "python3.13", **settings) -> str:
        name = "env-" + uuid.uuid4().hex[:10]
        lam.create_function(FunctionName=name, Runtime=runtime, Role=ROLE, Handler=handler,
                            Code={"ZipFile": zip_of(files)}, Timeout=settings.pop("Timeout", 30), **settings)
        names.append(name)
        return name
    yield make
    for name in names:
        lam.delete_function(FunctionName=name)


def invoke(lam, name: str, event=None) -> tuple[object, dict]:
    out = lam.invoke(FunctionName=name, Payload=json.dumps(event or {}).encode(), LogType="Tail")
    out["log"] = base64.b64decode(out.get("LogResult", "")).decode()
    return json.loads(out["Payload"].read()), out


def log_events(server, name: str) -> list[str]:
    with urllib.request.urlopen(f"{server.url}/_kinesim/logs/{name}", timeout=10) as r:
        return [e["message"] for e in json.loads(r.read())["events"]]


def records_of(kinesis, stream: str) -> list[dict]:
    shard = kinesis.list_shards(StreamName=stream)["Shards"][0]["ShardId"]
    it = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    return kinesis.get_records(ShardIterator=it["ShardIterator"])["Records"]


@pytest.fixture
def stream(kinesis):
    name = "env-" + uuid.uuid4().hex[:10]
    kinesis.create_stream(StreamName=name, ShardCount=1)
    return name


# 1. Python: the standard library, boto3 & co, the function's own code and layers -------------------

INTROSPECT = """
import os, pkgutil, sys
def handler(event, context):
    return {"path": sys.path, "executable": sys.executable, "version": list(sys.version_info[:2]),
            "pythonpath": os.environ.get("PYTHONPATH"), "env_path": os.environ["PATH"],
            # what is importable from outside the interpreter's own directories (its standard library)
            "modules": sorted(m.name for m in pkgutil.iter_modules()
                              if not getattr(m.module_finder, "path", "").startswith(sys.base_prefix))}
"""


@pytest.mark.parametrize("module", ["pandas", "requests", "flask", "kinesim", "orjson", "leaky_module"])
def test_a_package_kinesim_has_but_the_function_does_not_is_an_import_error(lam, make_function, module):
    """On AWS, `Unable to import module 'app': No module named 'pandas'` at init: here too, though
    kinesim's venv has pandas (and the server's PYTHONPATH has leaky_module)."""
    name = make_function({"app.py": f"import {module}\ndef handler(event, context):\n    return 'imported'\n"})
    error, raw = invoke(lam, name)
    assert raw["FunctionError"] == "Unhandled"
    assert error == {"errorMessage": f"Unable to import module 'app': No module named '{module}'",
                     "errorType": "Runtime.ImportModuleError", "requestId": "", "stackTrace": []}


def test_only_the_runtimes_packages_and_the_standard_library_are_importable(lam, make_function):
    out, _ = invoke(lam, make_function({"app.py": INTROSPECT, "helper.py": "X = 1\n"}))
    sdk = python_sdk.sdk_dir()
    assert out["modules"] == sorted(["app", "boto3", "botocore", "dateutil", "helper", "jmespath", "s3transfer",
                                     "simplejson", "six", "urllib3"])
    venv_site = os.path.join(sys.prefix, "lib")
    assert not [p for p in out["path"] if p.startswith(venv_site)], out["path"]
    code_dir, sdk_entry, *stdlib = out["path"]
    assert sdk_entry == sdk and out["pythonpath"] == sdk  # AWS's PYTHONPATH is its /var/runtime
    interpreter_prefix = os.path.dirname(os.path.dirname(os.path.realpath(out["executable"])))
    assert all(p.startswith(interpreter_prefix) for p in stdlib), (interpreter_prefix, stdlib)
    assert os.path.join(sys.prefix, "bin") not in out["env_path"].split(os.pathsep)


def test_boto3_from_the_runtime_reaches_kinesim(lam, make_function, kinesis, stream):
    """AWS_ENDPOINT_URL, the region and credentials are in the function's environment: a client
    made with no arguments talks to kinesim."""
    name = make_function({"app.py": (
        "import boto3, botocore\n"
        "client = boto3.client('kinesis')\n"
        "def handler(event, context):\n"
        "    out = client.put_record(StreamName=event['stream'], Data=b'from boto3', PartitionKey='k')\n"
        "    return {'seq': out['SequenceNumber'], 'boto3': boto3.__version__, 'file': boto3.__file__}\n")})
    out, raw = invoke(lam, name, {"stream": stream})
    assert "FunctionError" not in raw, out
    [record] = records_of(kinesis, stream)
    assert record["Data"] == b"from boto3" and record["SequenceNumber"] == out["seq"]
    import boto3
    assert out["boto3"] == boto3.__version__ and out["file"].startswith(python_sdk.sdk_dir())


def test_a_packaged_dependency_and_a_layer_still_import(lam, make_function):
    layer = zip_of({"python/layer_mod.py": "WHO = 'python/'\n",
                    "python/lib/python3.13/site-packages/layer_site.py": "WHO = 'site-packages'\n",
                    "python/lib/python3.13/site-packages/requests/__init__.py": "WHO = 'the layer'\n"})
    arn = lam.publish_layer_version(LayerName="env-" + uuid.uuid4().hex[:8], Content={"ZipFile": layer},
                                    CompatibleRuntimes=["python3.13"])["LayerVersionArn"]
    name = make_function({
        "app.py": ("import vendored, layer_mod, layer_site, requests\n"
                   "def handler(event, context):\n"
                   "    return [vendored.WHO, layer_mod.WHO, layer_site.WHO, requests.WHO]\n"),
        "vendored/__init__.py": "WHO = 'the package'\n"}, Layers=[arn])
    out, raw = invoke(lam, name)
    assert out == ["the package", "python/", "site-packages", "the layer"], raw["log"]


def test_the_functions_own_pythonpath_comes_after_the_runtimes_packages(lam, make_function):
    name = make_function({"app.py": INTROSPECT, "extra/extra_mod.py": "X = 1\n"},
                         Environment={"Variables": {"PYTHONPATH": "/var/task/nothing:extra"}})
    out, _ = invoke(lam, name)
    assert out["pythonpath"] == "/var/task/nothing:extra"
    code_dir, sdk, nothing, extra, *_ = out["path"]
    assert (sdk, nothing) == (python_sdk.sdk_dir(), "/var/task/nothing")
    assert extra in ("extra", os.path.join(code_dir, "extra"))  # Python 3.13 makes it absolute, 3.11 does not
    assert "extra_mod" in out["modules"]


def test_the_functions_python_variables_work_as_on_aws(lam, make_function):
    """The interpreter reads them at start (not started with -I/-E): a warnings filter, a hash seed."""
    name = make_function({"app.py": ("import sys\ndef handler(event, context):\n"
                                     "    return [sys.warnoptions, sys.flags.hash_randomization]\n")},
                         Environment={"Variables": {"PYTHONWARNINGS": "error::DeprecationWarning",
                                                    "PYTHONHASHSEED": "0"}})
    out, _ = invoke(lam, name)
    assert out == [["error::DeprecationWarning"], 0]


def test_a_no_op_reports_the_workers_own_memory(lam, make_function):
    """AWS reports ~40 MB for a no-op Python handler; kinesim reported the server's 400 MB (the
    forked server's peak, which getrusage carries across exec)."""
    name = make_function({"app.py": "def handler(event, context):\n    return None\n"})
    for _ in range(2):  # the cold start and a warm one
        out, raw = invoke(lam, name)
        assert out is None
        used = int(MEMORY.search(raw["log"]).group(1))
        assert 0 < used < 100, raw["log"]


# 2. which interpreter ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lone_interpreter_server(tmp_path_factory):
    """A server that finds no Python but its own: nothing on the PATH, empty pyenv and uv homes."""
    empty = tmp_path_factory.mktemp("no-pythons")
    with pytest.MonkeyPatch.context() as mp:
        for var in ("PATH", "PYENV_ROOT", "UV_PYTHON_INSTALL_DIR"):
            mp.setenv(var, str(empty))
        proc = start_server(tmp_path_factory)
    yield proc
    proc.stop()


def test_a_version_this_machine_lacks_runs_on_the_closest_with_a_warning_first(lone_interpreter_server):
    lam = client_for(lone_interpreter_server.url, "lambda")
    code = zip_of({"app.py": "import sys\ndef handler(event, context):\n    return list(sys.version_info[:2])\n"})
    for minor in (SERVER_MINOR + 2, SERVER_MINOR):
        name = f"py3{minor}-" + uuid.uuid4().hex[:8]
        lam.create_function(FunctionName=name, Runtime=f"python3.{minor}", Role=ROLE, Handler="app.handler",
                            Code={"ZipFile": code}, Timeout=30)
        out, raw = invoke(lam, name)
        assert out == [3, SERVER_MINOR]
        first, *rest = log_events(lone_interpreter_server, name)
        if minor == SERVER_MINOR:
            assert first.startswith("START RequestId:") and not any("WARNING" in e for e in rest)
        else:
            assert first.startswith(f"kinesim: WARNING: python3.{minor} runs on Python 3.{SERVER_MINOR}."), first
            assert f"no Python 3.{minor}" in first and first.endswith("\n")
            assert rest[0].startswith("START RequestId:")
            assert first in raw["log"]  # the cold start's LogType=Tail has it too


def test_each_version_runs_on_its_own_interpreter_where_the_machine_has_it(lam, make_function):
    """What `runtimes list` says is what runs: 3.X where found (PATH, pyenv, uv), else the closest."""
    for runtime in ("python3.11", "python3.12", "python3.13"):
        expected = runtimes.describe(runtime).executable
        out, _ = invoke(lam, make_function({"app.py": INTROSPECT}, runtime=runtime))
        assert os.path.realpath(out["executable"]) == os.path.realpath(expected)
        wanted = int(runtime.split(".")[1])
        if runtimes.describe(runtime).warning is None:
            assert out["version"] == [3, wanted]


def test_runtimes_list_shows_the_interpreter_of_each_python_runtime(capsys):
    assert runtimes.main(["list"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert f"(Python 3.{SERVER_MINOR}." in lines[f"python3.{SERVER_MINOR}"]
    closest = [name for name, line in lines.items() if name.startswith("python3.") and "the closest" in line]
    for name in closest:
        assert runtimes.describe(name).warning is not None


# 3. Node.js: the AWS SDK for JavaScript v3 the runtime includes ------------------------------------


@pytest.fixture(scope="module")
def js_sdk():
    """Node.js 24 and 22 and the JS SDK, installed as `make setup` does (skipped only if npm fails)."""
    if NPM is None:
        pytest.skip("npm is needed to install Node.js and the AWS SDK for JavaScript")
    try:
        for major in (24, 22):
            runtimes.install(major, quiet=True)
        return runtime_sdks.install_js_sdk(say=lambda line: None)
    except RuntimeError as e:
        pytest.skip(f"npm could not install the runtimes: {e}")


PUT_RECORD_ESM = """
import { KinesisClient, PutRecordCommand } from '@aws-sdk/client-kinesis';
import pkg from '@aws-sdk/client-kinesis/package.json' with { type: 'json' };
const client = new KinesisClient({});  // endpoint, region and credentials from the environment
export const handler = async (event) => {
  const out = await client.send(new PutRecordCommand({ StreamName: event.stream,
    Data: new TextEncoder().encode('from ' + process.env.AWS_EXECUTION_ENV), PartitionKey: 'k' }));
  return { seq: out.SequenceNumber, sdk: pkg.version };
};
"""

PUT_RECORD_CJS = """
const { KinesisClient, PutRecordCommand } = require('@aws-sdk/client-kinesis');
const client = new KinesisClient({});
exports.handler = async (event) => {
  const out = await client.send(new PutRecordCommand({ StreamName: event.stream,
    Data: Buffer.from('from ' + process.env.AWS_EXECUTION_ENV), PartitionKey: 'k' }));
  return { seq: out.SequenceNumber, sdk: require('@aws-sdk/client-kinesis/package.json').version };
};
"""


@pytest.mark.parametrize("runtime, files, handler", [
    ("nodejs24.x", {"index.mjs": PUT_RECORD_ESM}, "index.handler"),
    ("nodejs22.x", {"index.js": PUT_RECORD_CJS}, "index.handler"),
])
def test_node_handlers_import_the_js_sdk_unbundled_and_reach_kinesim(lam, make_function, kinesis, stream, js_sdk,
                                                                     runtime, files, handler):
    name = make_function(files, handler=handler, runtime=runtime)
    out, raw = invoke(lam, name, {"stream": stream})
    assert "FunctionError" not in raw, (out, raw["log"])
    assert out["sdk"] == runtime_sdks.JS_SDK_VERSION
    [record] = records_of(kinesis, stream)
    assert record["Data"] == f"from AWS_Lambda_{runtime}".encode() and record["SequenceNumber"] == out["seq"]


def test_the_functions_own_copy_of_a_package_wins_over_the_runtimes(lam, make_function, js_sdk):
    own = {"node_modules/@aws-sdk/client-kinesis/package.json":
           json.dumps({"name": "@aws-sdk/client-kinesis", "version": "0.0.1-own", "main": "index.js"}),
           "node_modules/@aws-sdk/client-kinesis/index.js": "exports.WHO = 'the function';\n",
           "cjs.js": "exports.handler = async () => require('@aws-sdk/client-kinesis').WHO;\n",
           "esm.mjs": "import { WHO } from '@aws-sdk/client-kinesis';\nexport const handler = async () => WHO;\n",
           "other.mjs": "import { S3Client } from '@aws-sdk/client-s3';\nexport const handler = async () => typeof S3Client;\n"}
    for handler, expected in (("cjs.handler", "the function"), ("esm.handler", "the function"),
                              ("other.handler", "function")):
        out, raw = invoke(lam, make_function(own, handler=handler, runtime="nodejs24.x"))
        assert out == expected, raw["log"]


def test_es_modules_import_from_layers_and_a_layer_wins_over_the_runtime(lam, make_function, js_sdk):
    """AWS's Node.js runtimes search NODE_PATH for `import` too: layers, then the runtime's SDK."""
    layer = zip_of({"nodejs/node_modules/layer-pkg/package.json": json.dumps({"name": "layer-pkg", "main": "main.js"}),
                    "nodejs/node_modules/layer-pkg/main.js": "exports.WHO = 'the layer';\n",
                    "nodejs/node_modules/@aws-sdk/util-dynamodb/index.js": "exports.marshall = () => 'the layer';\n"})
    arn = lam.publish_layer_version(LayerName="env-" + uuid.uuid4().hex[:8], Content={"ZipFile": layer},
                                    CompatibleRuntimes=["nodejs24.x"])["LayerVersionArn"]
    name = make_function({"index.mjs": (
        "import { WHO } from 'layer-pkg';\nimport { marshall } from '@aws-sdk/util-dynamodb';\n"
        "export const handler = async () => [WHO, marshall({})];\n")}, handler="index.handler",
        runtime="nodejs24.x", Layers=[arn])
    out, raw = invoke(lam, name)
    assert out == ["the layer", "the layer"], raw["log"]


def test_a_node_no_op_reports_the_workers_own_memory(lam, make_function, js_sdk):
    name = make_function({"index.mjs": "export const handler = async () => null;\n"}, handler="index.handler",
                         runtime="nodejs24.x")
    out, raw = invoke(lam, name)
    used = int(MEMORY.search(raw["log"]).group(1))
    assert out is None and 0 < used < 100, raw["log"]


def test_set_up_without_the_npm_registry_warns_and_goes_on(monkeypatch, tmp_path):
    """`make setup` offline: warnings saying what will not work, nothing half-installed, exit 0."""
    if NPM is None:
        pytest.skip("npm is needed to try the npm registry")
    monkeypatch.setenv("KINESIM_NODE_HOME", str(tmp_path))
    monkeypatch.setenv("npm_config_registry", f"http://127.0.0.1:{free_port()}/")  # nothing listens there
    monkeypatch.setenv("npm_config_fetch_retries", "0")
    said: list[str] = []
    warnings = runtime_sdks.setup(say=said.append)
    assert any("the npm registry is unreachable" in w and "Runtime.ImportModuleError" in w for w in warnings), warnings
    assert any(w.startswith("no Node.js 22: nodejs22.x functions will be refused") for w in warnings), warnings
    assert runtime_sdks.js_sdk_modules() is None and not list((tmp_path / "aws-sdk-js").iterdir())
    assert any(line.startswith("AWS SDK for JavaScript v3 3.895.0: installing") for line in said)
    assert runtime_sdks.main(["setup"]) == 0
