"""Packages of the AWS SDK for JavaScript v3 that AWS's Node.js runtimes have and `make setup` does
not install, fetched on first use: the scan of a function's imports; a function importing
@aws-sdk/client-transcribe is Pending while kinesim installs it, then Active, and its handler
constructs the client (ES module and CommonJS), through a real server and boto3; without the npm
registry, the handler's import fails with a Runtime.ImportModuleError saying what is missing and
what to do.

The servers use a node cache of their own (KINESIM_NODE_HOME): links to the machine's Node.js and a
copy of its JS SDK, so that each run installs the client again (9 s here) and leaves the machine's
SDK as it was."""
from __future__ import annotations

import base64
import io
import json
import os
import shutil
import uuid
import zipfile
from pathlib import Path

import pytest

from conftest import client_for, start_server
from kinesim.functions import js_sdk_fetch, runtime_sdks, runtimes
from kinesim.server import free_port
from npm_setup import NPM, NPM_TIMEOUT_S

ROLE = "arn:aws:iam::000000000000:role/any"
ONLINE = "@aws-sdk/client-transcribe"
OFFLINE = "@aws-sdk/client-polly"  # another client the set-up does not install
pytestmark = pytest.mark.timeout(NPM_TIMEOUT_S + 120)


def test_the_scan_finds_the_sdk_packages_the_code_imports_and_nothing_it_has(tmp_path):
    code, layer = tmp_path / "code", tmp_path / "layer"
    files = {
        code / "index.mjs": ("import { TranscribeClient } from '@aws-sdk/client-transcribe';\n"
                             "import { PollyClient } from \"@aws-sdk/client-polly\";\n"
                             "export * from '@aws-sdk/lib-storage';\n"
                             "const later = () => import('@smithy/util-stream');\n"
                             "import 'lodash';\n"),
        code / "lib" / "cjs.cjs": ("const { Bedrock } = require(\"@aws-sdk/client-bedrock-runtime/dist-cjs/x.js\");\n"
                                   "const x = __require(`@aws-sdk/client-athena`);\n"),
        code / "notes.txt": "require('@aws-sdk/client-not-code')\n",
        code / ".hidden" / "x.js": "require('@aws-sdk/client-hidden')\n",
        # its own copy of polly; a library of its own, with the SDK clients it expects as peers
        code / "node_modules" / "@aws-sdk" / "client-polly" / "package.json": "{}",
        code / "node_modules" / "lib" / "index.js": "require('@aws-sdk/client-not-scanned')\n",
        code / "node_modules" / "lib" / "package.json": json.dumps({
            "peerDependencies": {"@aws-sdk/client-appconfigdata": "^3", "@aws-sdk/client-optional": "^3", "x": "1"},
            "peerDependenciesMeta": {"@aws-sdk/client-optional": {"optional": True}}}),
        # a layer has the bedrock client (for Node.js 24 only) and a library that expects glue
        layer / "nodejs" / "node24" / "node_modules" / "@aws-sdk" / "client-bedrock-runtime" / "package.json": "{}",
        layer / "nodejs" / "node_modules" / "shared" / "package.json": json.dumps(
            {"peerDependencies": {"@aws-sdk/client-glue": "*"}}),
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert js_sdk_fetch.sdk_imports(str(code), [str(layer)], 24) == [
        "@aws-sdk/client-appconfigdata", "@aws-sdk/client-athena", "@aws-sdk/client-glue", "@aws-sdk/client-transcribe",
        "@aws-sdk/lib-storage", "@smithy/util-stream"]
    assert "@aws-sdk/client-bedrock-runtime" in js_sdk_fetch.sdk_imports(str(code), [str(layer)], 22)
    assert js_sdk_fetch.FETCHER.needed({"Runtime": "python3.13", "CodeDir": str(code)}) == []


def test_an_import_error_names_what_is_missing_and_what_to_do():
    unavailable = {OFFLINE: "the npm registry is unreachable"}
    esm = {"errorType": "Error", "errorMessage": f"Cannot find package '{OFFLINE}' imported from /x/index.mjs",
           "trace": []}
    explained = js_sdk_fetch.explain(esm, unavailable)
    assert explained["errorType"] == "Runtime.ImportModuleError"
    assert explained["errorMessage"].startswith(
        f"Error: Cannot find package '{OFFLINE}' imported from /x/index.mjs\n"
        f"kinesim: {OFFLINE} is not installed: the npm registry is unreachable.")
    assert f"runtime_sdks install {OFFLINE}" in explained["errorMessage"]
    other = {"errorType": "Runtime.ImportModuleError", "errorMessage": "Error: Cannot find module 'lodash'"}
    assert js_sdk_fetch.explain(other, unavailable) is None


# --- through a server ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def node_home(tmp_path_factory) -> Path:
    """A node cache linking the machine's Node.js 24, with a copy of its JS SDK (less what was
    installed on first use there)."""
    if NPM is None:
        pytest.skip("npm is needed to install the AWS SDK for JavaScript")
    try:
        runtimes.install(24, quiet=True)
        modules = Path(runtime_sdks.install_js_sdk(say=lambda line: None))
    except RuntimeError as e:
        pytest.skip(f"npm could not install the runtimes: {e}")
    home = tmp_path_factory.mktemp("node-home")
    (home / "24").symlink_to(runtimes.node_home() / "24", target_is_directory=True)
    sdk = home / "aws-sdk-js" / runtime_sdks.JS_SDK_VERSION
    shutil.copytree(modules.parent, sdk, symlinks=True)
    for line in runtime_sdks.on_demand_packages():
        shutil.rmtree(sdk / "node_modules" / line.rsplit("@", 1)[0], ignore_errors=True)
    (sdk / ".kinesim-on-demand").unlink(missing_ok=True)
    return home


def server_with(tmp_path_factory, node_home: Path, **env: str):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KINESIM_NODE_HOME", str(node_home))
        for key, value in env.items():
            mp.setenv(key, value)
        return start_server(tmp_path_factory)


@pytest.fixture(scope="module")
def online(tmp_path_factory, node_home):
    proc = server_with(tmp_path_factory, node_home)
    yield client_for(proc.url, "lambda")
    proc.stop()


@pytest.fixture(scope="module")
def offline(tmp_path_factory, node_home):
    proc = server_with(tmp_path_factory, node_home, npm_config_registry=f"http://127.0.0.1:{free_port()}/")
    yield client_for(proc.url, "lambda")
    proc.stop()


def zip_of(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return buf.getvalue()


def create(lam, files: dict[str, str], handler: str) -> dict:
    return lam.create_function(FunctionName="sdk-" + uuid.uuid4().hex[:10], Runtime="nodejs24.x", Role=ROLE,
                               Handler=handler, Code={"ZipFile": zip_of(files)}, Timeout=30)


def invoke(lam, name: str) -> tuple[object, dict]:
    out = lam.invoke(FunctionName=name, LogType="Tail")
    out["log"] = base64.b64decode(out.get("LogResult", "")).decode()
    return json.loads(out["Payload"].read()), out


def handlers(package: str, client: str) -> dict[str, str]:
    answer = "({ region: await client.config.region(), version: pkg.version })"
    return {
        "esm.mjs": (f"import {{ {client} }} from '{package}';\n"
                    f"import pkg from '{package}/package.json' with {{ type: 'json' }};\n"
                    f"const client = new {client}({{}});\nexport const handler = async () => {answer};\n"),
        "cjs.js": (f"const {{ {client} }} = require('{package}');\nconst pkg = require('{package}/package.json');\n"
                   f"const client = new {client}({{}});\nexports.handler = async () => {answer};\n")}


def test_a_client_the_set_up_lacks_is_installed_while_the_function_is_pending(online, node_home):
    sdk = node_home / "aws-sdk-js" / runtime_sdks.JS_SDK_VERSION / "node_modules"
    assert not (sdk / ONLINE).exists()
    files = handlers(ONLINE, "TranscribeClient")
    first = create(online, files, "esm.handler")
    assert (first["State"], first["StateReasonCode"]) == ("Pending", "Creating"), first
    online.get_waiter("function_active_v2").wait(FunctionName=first["FunctionName"],
                                                 WaiterConfig={"Delay": 1, "MaxAttempts": 120})
    config = online.get_function_configuration(FunctionName=first["FunctionName"])
    assert config["State"] == "Active" and "StateReason" not in config
    out, raw = invoke(online, first["FunctionName"])
    assert "FunctionError" not in raw, (out, raw["log"])
    assert out == {"region": "us-east-1", "version": runtime_sdks.JS_SDK_VERSION}
    # once per machine: the next function finds it installed; only what the SDK lacked was added
    second = create(online, files, "cjs.handler")
    assert second["State"] == "Active" and "StateReason" not in second
    out, raw = invoke(online, second["FunctionName"])
    assert out == {"region": "us-east-1", "version": runtime_sdks.JS_SDK_VERSION}, raw["log"]
    assert runtime_sdks._size_mb(sdk / ONLINE) < 2
    assert (sdk.parent / ".kinesim-on-demand").read_text() == f"{ONLINE}@{runtime_sdks.JS_SDK_VERSION}\n"


def test_without_the_npm_registry_the_import_error_says_what_is_missing_and_what_to_do(offline, node_home):
    assert not (node_home / "aws-sdk-js" / runtime_sdks.JS_SDK_VERSION / "node_modules" / OFFLINE).exists()
    files = handlers(OFFLINE, "PollyClient")
    for handler, message in (("esm.handler", f"Error: Cannot find package '{OFFLINE}' imported from "),
                             ("cjs.handler", f"Error: Cannot find module '{OFFLINE}'\nRequire stack:")):
        name = create(offline, files, handler)["FunctionName"]
        offline.get_waiter("function_active_v2").wait(FunctionName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
        error, raw = invoke(offline, name)
        assert raw["FunctionError"] == "Unhandled"
        assert error["errorType"] == "Runtime.ImportModuleError", error
        assert error["errorMessage"].startswith(message), error
        assert (f"kinesim: {OFFLINE} is not installed: could not install {OFFLINE} from npm: the npm registry is "
                f"unreachable." in error["errorMessage"]), error
        assert f"`python -m kinesim.functions.runtime_sdks install {OFFLINE}`" in error["errorMessage"]
        assert raw["log"].startswith(f"kinesim: WARNING: {OFFLINE} is not installed: "), raw["log"]
        assert "INIT_REPORT" in raw["log"] and "Error Type: Runtime.ImportModuleError" in raw["log"]
    assert not [p for p in os.listdir(node_home / "aws-sdk-js") if ".tmp-" in p]  # nothing half-installed left
    # an update whose code imports it: InProgress while kinesim tries, then Successful
    name = create(offline, {"index.js": "exports.handler = async () => 1;\n"}, "index.handler")["FunctionName"]
    updated = offline.update_function_code(FunctionName=name, ZipFile=zip_of(files))
    assert (updated["State"], updated["LastUpdateStatus"], updated["LastUpdateStatusReasonCode"]) == \
        ("Active", "InProgress", "Creating"), updated
    offline.get_waiter("function_updated_v2").wait(FunctionName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
