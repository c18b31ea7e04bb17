"""The AWS SDK for JavaScript v3 that AWS's Node.js runtimes include, and kinesim's set-up of the
function runtimes (`make setup`). The Python side, boto3 & co, is python_sdk.py.

AWS's Node.js 18+ runtimes include the AWS SDK for JavaScript v3 in /var/runtime/node_modules, at
one minor version per runtime and Region that AWS no longer lists ("To find the specific version
... create a Lambda function with the following code", lambda-nodejs.html#nodejs-sdk-included).
JS_SDK_VERSION is the one aws-cdk's integration tests record for nodejs22.x (3.895.0,
packages/@aws-cdk-testing/framework-integ/test/aws-lambda/test/integ.capacity-provider-defaults.ts).
kinesim installs a selection of its packages from npm (the whole SDK is over 400 packages) and
strips them to their CommonJS builds as AWS's runtime does (aws/aws-lambda-base-images#80:
/var/runtime/node_modules/@aws-sdk/* hold only dist-cjs; their package.json "node" conditions
point there for `import` too): 17 MB instead of 71. A handler resolves them after its own
node_modules and its layers (NODE_PATH, which ES module imports search too, as on AWS: see
node/node_path_hooks.mjs).

    python -m kinesim.functions.runtime_sdks setup      # Node.js 24 and 22, the JS SDK: in parallel
    python -m kinesim.functions.runtime_sdks install    # the JS SDK only
    python -m kinesim.functions.runtime_sdks status
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from . import python_sdk, runtimes

JS_SDK_VERSION = "3.895.0"
# The clients of the services kinesim serves, then what handlers commonly import with them in
# AWS's examples (a DynamoDB table next to a stream, a secret or parameter read at start-up, an
# event put on a bus): these load, and fail only when they call a service kinesim does not serve.
JS_SDK_PACKAGES = (
    "client-kinesis", "client-lambda", "client-firehose", "client-s3", "client-sqs", "client-sns",
    "client-cloudwatch-logs", "lib-storage", "s3-request-presigner", "client-sts", "credential-providers",
    "client-dynamodb", "lib-dynamodb", "util-dynamodb", "client-eventbridge", "client-ssm",
    "client-secrets-manager", "client-sfn", "client-cloudwatch", "client-ses", "client-sesv2", "client-iam",
    "client-kms")
_JS_MARKER = ".kinesim-installed"
_NETWORK_ERRORS = re.compile(r"ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNREFUSED|ECONNRESET|ENETUNREACH|network", re.I)

_lock = threading.Lock()


# --- Node.js --------------------------------------------------------------------------------------

def js_sdk_dir() -> Path:
    return runtimes.node_home() / "aws-sdk-js" / JS_SDK_VERSION


def _js_marker_text() -> str:
    return "\n".join(f"@aws-sdk/{p}@{JS_SDK_VERSION}" for p in JS_SDK_PACKAGES) + "\n"


def js_sdk_modules() -> str | None:
    """The node_modules directory of the installed JS SDK (AWS's /var/runtime/node_modules), or None."""
    directory = js_sdk_dir()
    try:
        if (directory / _JS_MARKER).read_text() == _js_marker_text():
            return str(directory / "node_modules")
    except OSError:
        pass
    return None


def _strip_to_commonjs(node_modules: Path) -> None:
    for scope in ("@aws-sdk", "@smithy"):
        for package in (node_modules / scope).glob("*"):
            for build in ("dist-es", "dist-types"):
                shutil.rmtree(package / build, ignore_errors=True)


def _size_mb(path: Path) -> float:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total / 1e6


def _remove_abandoned(target: Path) -> None:
    """Half-installed directories of installs that were killed."""
    for old in target.parent.glob(f"{target.name}.tmp-*"):
        pid = old.name.split(".tmp-", 1)[1].split("-", 1)[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            shutil.rmtree(old, ignore_errors=True)


def install_js_sdk(say: Callable[[str], None] = print) -> str:
    """Install JS_SDK_PACKAGES at JS_SDK_VERSION from npm (a no-op when already there); returns
    the node_modules path. RuntimeError with npm's last lines and what to do when it fails."""
    existing = js_sdk_modules()
    if existing:
        return existing
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not on the PATH: install Node.js and npm (the machine's package manager), then "
                           "run `python -m kinesim.functions.runtime_sdks install`")
    target = js_sdk_dir()
    _remove_abandoned(target)
    building = target.with_name(f"{target.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True)
    specs = [f"@aws-sdk/{p}@{JS_SDK_VERSION}" for p in JS_SDK_PACKAGES]
    say(f"AWS SDK for JavaScript v3 {JS_SDK_VERSION}: installing {len(specs)} packages and their dependencies "
        f"from npm into {target}")
    cmd = [npm, "install", "--prefix", str(building), "--no-save", "--no-package-lock", "--no-audit", "--no-fund",
           "--loglevel=http", *specs]
    started = time.monotonic()
    tail: list[str] = []
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                text=True, errors="replace")
        assert proc.stdout is not None
        watchdog = threading.Timer(runtimes.INSTALL_TIMEOUT_S, proc.kill)  # a hung npm ends the read below
        watchdog.daemon = True
        watchdog.start()
        fetched = 0
        for line in proc.stdout:  # "npm http fetch GET 200 https://registry... 120ms": one per download
            tail = (tail + [line.rstrip()])[-15:]
            if " fetch " in line:
                fetched += 1
                if fetched % 25 == 0:
                    say(f"AWS SDK for JavaScript v3: {fetched} downloads, {time.monotonic() - started:.0f} s")
        code = proc.wait()
        timed_out = watchdog.finished.is_set()  # it ran: npm was killed
        watchdog.cancel()
    except OSError as e:
        shutil.rmtree(building, ignore_errors=True)
        raise RuntimeError(f"{' '.join(cmd[:2])} failed: {e}") from None
    if code != 0:
        shutil.rmtree(building, ignore_errors=True)
        why = (f"npm did not finish in {runtimes.INSTALL_TIMEOUT_S} s" if timed_out
               else "the npm registry is unreachable" if any(_NETWORK_ERRORS.search(t) for t in tail)
               else f"npm exited with status {code}")
        raise RuntimeError(f"could not install the AWS SDK for JavaScript v3 {JS_SDK_VERSION}: {why}. Node.js handlers "
                           "that import @aws-sdk/* without bundling it will fail with Runtime.ImportModuleError until "
                           "`python -m kinesim.functions.runtime_sdks install` succeeds.\nnpm's last lines:\n"
                           + "\n".join(tail))
    _strip_to_commonjs(building / "node_modules")
    (building / _JS_MARKER).write_text(_js_marker_text())
    with _lock:
        if js_sdk_modules() is None:
            if target.exists():  # an older selection: replaced
                shutil.rmtree(target)
            os.rename(building, target)
        else:
            shutil.rmtree(building, ignore_errors=True)
    say(f"AWS SDK for JavaScript v3 {JS_SDK_VERSION}: {_size_mb(target):.0f} MB in {target}, "
        f"{time.monotonic() - started:.0f} s")
    return str(target / "node_modules")


# --- set-up ---------------------------------------------------------------------------------------

SETUP_NODE_MAJORS = (24, 22)  # AWS's current Node.js runtimes


def setup(say: Callable[[str], None] = print) -> list[str]:
    """What `make setup` installs, the npm downloads in parallel. Returns warnings (never raises:
    without the network, kinesim still serves, with fewer runtimes)."""
    warnings: list[str] = []
    started = time.monotonic()

    def node(major: int) -> None:
        try:
            if runtimes.cached_node(major) is None:
                say(f"Node.js {major}: installing from npm into {runtimes.node_home() / str(major)}")
            runtimes.install(major, quiet=True)
            say(f"Node.js {major}: {runtimes.cached_node(major)}")
        except Exception as e:  # noqa: BLE001 - set-up goes on without it, saying so
            warnings.append(f"no Node.js {major}: nodejs{major}.x functions will be refused ({e})")

    def js_sdk() -> None:
        try:
            install_js_sdk(say)
        except Exception as e:  # noqa: BLE001 - set-up goes on without it, saying so
            warnings.append(str(e))

    threads = [threading.Thread(target=node, args=(m,)) for m in SETUP_NODE_MAJORS]
    threads.append(threading.Thread(target=js_sdk))
    for t in threads:
        t.start()
    say(f"Python functions' boto3 & co: {python_sdk.sdk_dir()}")
    for t in threads:
        t.join()
    say(f"runtimes set up in {time.monotonic() - started:.0f} s")
    return warnings


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    command = args[0] if args else "status"
    if command == "setup":
        for warning in setup():
            print(f"kinesim: warning: {warning}", file=sys.stderr)
        return 0
    if command == "install":
        try:
            install_js_sdk()
        except RuntimeError as e:
            print(f"kinesim: {e}", file=sys.stderr)
            return 1
        return 0
    if command == "status":
        print(f"python SDK  {python_sdk.sdk_dir()}  ({', '.join(python_sdk.PYTHON_SDK)})")
        modules = js_sdk_modules()
        print(f"JS SDK v3   {modules + f'  ({JS_SDK_VERSION})' if modules else '-  not installed'}")
        return 0
    print("usage: python -m kinesim.functions.runtime_sdks [setup | install | status]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
