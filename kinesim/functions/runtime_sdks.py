"""The AWS SDK for JavaScript v3 that AWS's Node.js runtimes include, and kinesim's set-up of the
function runtimes (`make setup`). The Python side, boto3 & co, is python_sdk.py.

AWS's Node.js 18+ runtimes include the AWS SDK for JavaScript v3 in /var/runtime/node_modules, at
one minor version per runtime and Region that AWS no longer lists ("To find the specific version
... create a Lambda function with the following code", lambda-nodejs.html#nodejs-sdk-included).
JS_SDK_VERSION is the one aws-cdk's integration tests record for nodejs22.x (3.895.0,
packages/@aws-cdk-testing/framework-integ/test/aws-lambda/test/integ.capacity-provider-defaults.ts).
AWS's runtime strips its packages to their CommonJS builds (aws/aws-lambda-base-images#80:
/var/runtime/node_modules/@aws-sdk/* hold only dist-cjs; their package.json "node" conditions
point there for `import` too), and so does kinesim. A handler resolves them after its own
node_modules and its layers (NODE_PATH, which ES module imports search too, as on AWS: see
node/node_path_hooks.mjs).

AWS's runtime has every client of the SDK, over 400 packages. Trimmed as AWS trims them they would
still be some 300 MB here, from over 1 GB of packages downloaded, some 8 minutes (measured on 20
clients: 73 MB as published, 9 MB of dist-cjs of their own, 57 MB as a trimmed tree, 24 s; 6 of
them are not published at JS_SDK_VERSION and pin older @aws-sdk/core & co, which npm nests under
each of them). So `make setup` installs JS_SDK_PACKAGES (17 MB instead of 71): the services
kinesim serves and what handlers commonly use with them. Any other `@aws-sdk/*` (or
`@smithy/*`) package is installed on first use (install_js_package; js_sdk_fetch.py finds the
packages a function's code imports and fetches them while the function is Pending): the newest
version up to JS_SDK_VERSION, stripped the same way, placed in the same node_modules whole (one
rename) with only the dependencies this directory lacks nested under it (client-transcribe: 9 s,
0.2 MB instead of 6: 64 of its 66 packages are here already). Each package is installed once per
machine: concurrent installs of it, in threads or in other server processes, wait on a lock file
and find it there.

    python -m kinesim.functions.runtime_sdks setup      # Node.js 24 and 22, the JS SDK: in parallel
    python -m kinesim.functions.runtime_sdks install    # the JS SDK only
    python -m kinesim.functions.runtime_sdks install @aws-sdk/client-transcribe   # one more package
    python -m kinesim.functions.runtime_sdks status
"""
from __future__ import annotations

import contextlib
import fcntl
import json
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
_ON_DEMAND_RECORD = ".kinesim-on-demand"  # the packages installed on first use, one a line
_NETWORK_ERRORS = re.compile(r"ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNREFUSED|ECONNRESET|ENETUNREACH|network", re.I)
_NOT_PUBLISHED = re.compile(r"\bE404\b|\bETARGET\b|No matching version found|404 Not Found")
# What an on-demand install may name: a package of the SDK's scopes, no path in it
SDK_PACKAGE = re.compile(r"@(?:aws-sdk|smithy)/[a-z0-9][a-z0-9._-]*\Z")
# An install on first use fails fast without the network: npm's defaults retry for over a minute
# (70 s against a closed port here, 2 s with these); a user's own npm_config_* settings win.
_ON_DEMAND_NPM_ENV = {"npm_config_fetch_retries": "1", "npm_config_fetch_retry_mintimeout": "1000",
                      "npm_config_fetch_retry_maxtimeout": "5000"}

_lock = threading.Lock()
_package_locks: dict[str, threading.Lock] = {}  # _file_lock's, by path


class NotInSdk(RuntimeError):
    """npm has no version of the package up to JS_SDK_VERSION: AWS's runtime does not have it either."""


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


def js_package_installed(name: str) -> bool:
    """Whether a handler can resolve package `name` (`@aws-sdk/client-s3`) from the installed JS SDK."""
    modules = js_sdk_modules()
    return modules is not None and os.path.isfile(os.path.join(modules, name, "package.json"))


def on_demand_packages() -> list[str]:
    """The packages installed on first use so far (install_js_package)."""
    try:
        return sorted(set((js_sdk_dir() / _ON_DEMAND_RECORD).read_text().split()))
    except OSError:
        return []


def _strip_to_commonjs(node_modules: Path) -> None:
    """dist-es and dist-types of every @aws-sdk/* and @smithy/* package, nested ones included."""
    for root, dirs, _files in os.walk(node_modules):
        if os.path.basename(os.path.dirname(root)) in ("@aws-sdk", "@smithy"):
            for build in ("dist-es", "dist-types"):
                if build in dirs:
                    shutil.rmtree(os.path.join(root, build), ignore_errors=True)
                    dirs.remove(build)


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


def _npm() -> str:
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not on the PATH: install Node.js and npm (the machine's package manager), then "
                           "run `python -m kinesim.functions.runtime_sdks install`")
    return npm


def _building_dir(target: Path, what: str = "") -> Path:
    """A fresh directory next to `target` (the same file system: renamed into place when complete)."""
    _remove_abandoned(target)
    building = target.with_name(f"{target.name}.tmp-{os.getpid()}-{threading.get_ident()}{what}")
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True)
    return building


def _npm_install(building: Path, specs: list[str], say: Callable[[str], None], label: str,
                 env: dict[str, str] | None = None) -> tuple[str | None, list[str]]:
    """`npm install` of `specs` into `building`, its progress said every 25 downloads. Returns
    (None, npm's last lines) when it succeeded, else (why, npm's last lines)."""
    cmd = [_npm(), "install", "--prefix", str(building), "--no-save", "--no-package-lock", "--no-audit", "--no-fund",
           "--loglevel=http", *specs]
    started = time.monotonic()
    tail: list[str] = []
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                text=True, errors="replace", env=env)
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
                    say(f"{label}: {fetched} downloads, {time.monotonic() - started:.0f} s")
        code = proc.wait()
        timed_out = watchdog.finished.is_set()  # it ran: npm was killed
        watchdog.cancel()
    except OSError as e:
        return f"{' '.join(cmd[:2])} failed: {e}", tail
    if code == 0:
        return None, tail
    return (f"npm did not finish in {runtimes.INSTALL_TIMEOUT_S} s" if timed_out
            else "the npm registry is unreachable" if any(_NETWORK_ERRORS.search(t) for t in tail)
            else f"npm exited with status {code}"), tail


def install_js_sdk(say: Callable[[str], None] = print, *, on_demand: bool = False) -> str:
    """Install JS_SDK_PACKAGES at JS_SDK_VERSION from npm (a no-op when already there); returns
    the node_modules path. RuntimeError with npm's last lines and what to do when it fails.
    `on_demand`: a function needs it now, so npm gives up sooner without the network."""
    existing = js_sdk_modules()
    if existing:
        return existing
    _npm()
    target = js_sdk_dir()
    building = _building_dir(target)
    specs = [f"@aws-sdk/{p}@{JS_SDK_VERSION}" for p in JS_SDK_PACKAGES]
    say(f"AWS SDK for JavaScript v3 {JS_SDK_VERSION}: installing {len(specs)} packages and their dependencies "
        f"from npm into {target}")
    started = time.monotonic()
    why, tail = _npm_install(building, specs, say, "AWS SDK for JavaScript v3",
                             {**_ON_DEMAND_NPM_ENV, **os.environ} if on_demand else None)
    if why is not None:
        shutil.rmtree(building, ignore_errors=True)
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


@contextlib.contextmanager
def _file_lock(path: Path):
    """Held by one thread of one process at a time (flock: released if the process dies)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with _lock:
        thread_lock = _package_locks.setdefault(str(path), threading.Lock())
    with thread_lock, open(path, "a") as f:  # flock is per open file: threads need their own lock first
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _version_spec(name: str, modules: Path) -> str:
    """What to ask npm for: an @aws-sdk package at its newest version up to JS_SDK_VERSION (not every
    package is published at each SDK version: client-apigatewaymanagementapi's is 3.888.0); an
    @smithy package at the range the SDK's packages here ask for, else its newest."""
    if name.startswith("@aws-sdk/"):
        return f"{name}@<={JS_SDK_VERSION}"
    for manifest in sorted(modules.glob("@*/*/package.json")):
        try:
            wanted = json.loads(manifest.read_text()).get("dependencies", {}).get(name)
        except (OSError, ValueError):
            continue
        if isinstance(wanted, str):
            return f"{name}@{wanted}"
    return name


def _top_level(node_modules: Path) -> list[str]:
    """The packages directly in a node_modules directory: `tslib`, `@smithy/core`."""
    names = []
    for entry in sorted(node_modules.iterdir()) if node_modules.is_dir() else ():
        if entry.name.startswith("."):
            continue
        if entry.name.startswith("@"):
            names += [f"{entry.name}/{p.name}" for p in sorted(entry.iterdir()) if not p.name.startswith(".")]
        else:
            names.append(entry.name)
    return names


def _version(package: Path) -> str | None:
    try:
        return json.loads((package / "package.json").read_text()).get("version")
    except (OSError, ValueError):
        return None


def _place(tree: Path, name: str, modules: Path) -> None:
    """Move package `name`, installed by npm in `tree` (a node_modules directory), into the SDK's
    `modules`: its dependencies that `modules` has at the same version are left out (Node.js finds
    those walking up from it), the others nested in its own node_modules, and the package appears
    whole (one rename) so that a handler never sees half of it."""
    package = tree / name
    if not (package / "package.json").is_file():
        raise RuntimeError(f"npm did not install {name}")
    nested = package / "node_modules"
    for other in _top_level(tree):
        if other == name or (_version(modules / other) or "-") == _version(tree / other):
            continue
        if not (nested / other).exists():  # a copy npm nested under the package is the one it asked for
            (nested / other).parent.mkdir(parents=True, exist_ok=True)
            os.rename(tree / other, nested / other)
    (modules / name).parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(package, modules / name)
    except OSError:
        if not (modules / name / "package.json").is_file():  # not a concurrent install's doing
            raise


def install_js_package(name: str, say: Callable[[str], None] = print) -> str:
    """Install one more package of the SDK AWS's runtime has (`@aws-sdk/client-transcribe`) into
    the JS SDK's node_modules, the SDK first if it is not there (a no-op when the package is
    there); returns its directory. NotInSdk when npm has no version of it up to JS_SDK_VERSION,
    RuntimeError saying why when npm fails."""
    if not SDK_PACKAGE.match(name):
        raise NotInSdk(f"{name} is not a package of the AWS SDK for JavaScript v3 (@aws-sdk/* or @smithy/*)")
    target = js_sdk_dir()
    if js_sdk_modules() is None:  # the SDK first, once for all the packages wanted with it
        with _file_lock(target.parent / ".locks" / f"{JS_SDK_VERSION}.lock"):
            install_js_sdk(say, on_demand=True)
    modules = Path(install_js_sdk(say))
    if js_package_installed(name):
        return str(modules / name)
    with _file_lock(target.parent / ".locks" / f"{JS_SDK_VERSION}-{name.replace('/', '+')}.lock"):
        if js_package_installed(name):  # installed meanwhile, by another thread or server
            return str(modules / name)
        spec = _version_spec(name, modules)
        say(f"AWS SDK for JavaScript v3 {JS_SDK_VERSION}: installing {spec} from npm into {modules}")
        started = time.monotonic()
        building = _building_dir(target, "-" + name.replace("/", "+"))
        try:
            why, tail = _npm_install(building, [spec], say, name, {**_ON_DEMAND_NPM_ENV, **os.environ})
            if why is not None:
                if any(_NOT_PUBLISHED.search(t) for t in tail):
                    raise NotInSdk(f"npm has no {name} up to version {JS_SDK_VERSION}: AWS's Node.js runtimes "
                                   f"with the AWS SDK for JavaScript v3 {JS_SDK_VERSION} do not include it either")
                raise RuntimeError(f"could not install {name} from npm: {why}.\nnpm's last lines:\n" + "\n".join(tail))
            _strip_to_commonjs(building / "node_modules")
            _place(building / "node_modules", name, modules)
            with open(target / _ON_DEMAND_RECORD, "a") as record:
                record.write(f"{name}@{_version(modules / name)}\n")
        finally:
            shutil.rmtree(building, ignore_errors=True)
    say(f"AWS SDK for JavaScript v3 {JS_SDK_VERSION}: {name}@{_version(modules / name)}, "
        f"{_size_mb(modules / name):.1f} MB, {time.monotonic() - started:.0f} s")
    return str(modules / name)


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
            for name in args[1:]:  # `client-transcribe` stands for `@aws-sdk/client-transcribe`
                install_js_package(name if name.startswith("@") else f"@aws-sdk/{name}")
        except RuntimeError as e:
            print(f"kinesim: {e}", file=sys.stderr)
            return 1
        return 0
    if command == "status":
        print(f"python SDK  {python_sdk.sdk_dir()}  ({', '.join(python_sdk.PYTHON_SDK)})")
        modules = js_sdk_modules()
        print(f"JS SDK v3   {modules + f'  ({JS_SDK_VERSION})' if modules else '-  not installed'}")
        extra = on_demand_packages() if modules else []
        if extra:
            print(f"            installed on first use: {', '.join(extra)}")
        return 0
    print("usage: python -m kinesim.functions.runtime_sdks [setup | install [PACKAGE...] | status]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
