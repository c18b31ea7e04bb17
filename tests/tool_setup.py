"""The deploy tools users already have — the SAM CLI, the AWS CLI and the AWS CDK — installed once for
the end-to-end tests (tests/test_tool_*.py), the way a user installs them: `pip install aws-sam-cli`
in a virtualenv of its own (it pins boto3/botocore/click versions that conflict with the project's),
`npm install aws-cdk aws-cdk-lib constructs`, and the AWS CLI v2 that AWS's tutorials are written
for as Debian packages it (`apt-get install awscli` as root, system-wide, 19 s). The others go to a
cache outside the work tree, `$XDG_CACHE_HOME/kinesim/tools/` (else `~/.cache/kinesim/tools/`), one
directory per version, so a second run and the next session reuse them. Measured on the 2-core
machine: the SAM CLI venv 50 s idle to 160 s under load (340 MB), the CDK 10-15 s (190 MB). A test
skips with pip's, npm's or apt-get's own words only when the install cannot be done here (no
registry, no node/npm, no Node.js >= 20, not root)."""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from kinesim.deploy import build_esbuild
from npm_setup import NPM, NPM_TIMEOUT_S

# The newest releases when these tests were written; the cache key, so a bump installs anew.
SAM_CLI_VERSION = "1.170.0"
AWSCLI_VERSION = "1.46.3"  # only when no working `aws` is on the PATH or in the project's venv
CDK_CLI_VERSION = "2.1148.1"
CDK_LIB_VERSION = "2.276.0"
CONSTRUCTS_VERSION = "10.8.1"
# For NodejsFunction's local bundling (else it wants Docker): the esbuild kinesim deploy installs.
ESBUILD_VERSION = build_esbuild.ESBUILD_VERSION
CDK_MIN_NODE = 20  # aws-cdk-lib's "engines"
PREFERRED_NODE = 22  # what the AWS SDK for JavaScript v3 inside the CLI needs from 2027

PIP_TIMEOUT_S = 600
APT_TIMEOUT_S = 600  # each of apt-get update and install (Debian's awscli: 19 s measured)
REGION = "us-east-1"
CDK_EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "cdk-uploads"


def tools_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kinesim" / "tools"


@contextlib.contextmanager
def _locked(name: str):
    """One installer at a time per tool (pytest-xdist runs test files in two processes)."""
    home = tools_home()
    home.mkdir(parents=True, exist_ok=True)
    with open(home / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield home


def _install(cmd: list[str], what: str, timeout: float, **kwargs) -> None:
    """Run an installer; a failure skips the test with the installer's last words (the registry is
    out of reach, or the package cannot be had here)."""
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired:
        pytest.skip(f"{what}: `{' '.join(cmd)}` did not finish in {timeout:.0f}s")
    if res.returncode != 0:
        # pip prints a warning per missing local find-links directory: keep the real error
        lines = [line for line in (res.stderr + res.stdout).splitlines() if "is ignored: it is neither" not in line]
        pytest.skip(f"{what}: `{' '.join(cmd)}` failed ({res.returncode}): {' '.join(lines)[-800:]}")


def _start(directory: Path) -> float:
    """Begin an install in `directory`, removing what an interrupted one left (only the stamp
    `_note_install` writes last says an install is complete)."""
    shutil.rmtree(directory, ignore_errors=True)
    return time.monotonic()


def _note_install(directory: Path, started: float) -> None:
    (directory / ".kinesim-installed").write_text(f"installed in {time.monotonic() - started:.1f}s\n")


# --- Python tools: the SAM CLI (and the AWS CLI when none works) ------------------------------------

def sam_venv() -> Path:
    """The SAM CLI's virtualenv, made on first use: `python -m venv` + `pip install aws-sam-cli==V`."""
    with _locked("sam") as home:
        venv = home / f"sam-{SAM_CLI_VERSION}"
        if (venv / ".kinesim-installed").exists():
            return venv
        started = _start(venv)
        _install([sys.executable, "-m", "venv", str(venv)], "no virtualenv for the SAM CLI", 120)
        _install([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                  f"aws-sam-cli=={SAM_CLI_VERSION}"], f"the SAM CLI {SAM_CLI_VERSION} cannot be installed",
                 PIP_TIMEOUT_S)
        _note_install(venv, started)
        return venv


def sam_cli() -> str:
    return str(sam_venv() / "bin" / "sam")


def _works(aws: str, env: dict[str, str]) -> bool:
    try:
        res = subprocess.run([aws, "--version"], capture_output=True, text=True, timeout=60, env=env)
    except (OSError, subprocess.SubprocessError):
        return False
    return res.returncode == 0 and "aws-cli/" in res.stdout + res.stderr


def aws_cli(env: dict[str, str]) -> str:
    """A working `aws`: the one on the PATH, else the project venv's (awscli is a dev dependency),
    else awscli v1 from PyPI installed into the SAM CLI's venv (they resolve together)."""
    for candidate in (shutil.which("aws"), str(Path(sys.executable).parent / "aws")):
        if candidate and os.access(candidate, os.X_OK) and _works(candidate, env):
            return candidate
    venv = sam_venv()
    with _locked("sam"):
        aws = venv / "bin" / "aws"
        if not aws.exists():
            _install([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                      f"awscli=={AWSCLI_VERSION}"], f"no working `aws` and awscli {AWSCLI_VERSION} cannot be installed",
                     PIP_TIMEOUT_S)
    return str(aws)


def _is_v2(aws: str, env: dict[str, str]) -> bool:
    try:
        res = subprocess.run([aws, "--version"], capture_output=True, text=True, timeout=60, env=env)
    except (OSError, subprocess.SubprocessError):
        return False
    return res.returncode == 0 and (res.stdout + res.stderr).startswith("aws-cli/2.")


def _v2_candidates() -> list[str]:
    """Where AWS's installer (/usr/local/bin) and Debian's package (/usr/bin) put theirs, then every
    other `aws` on the PATH (which may put awscli v1, from pyenv or the venv, first)."""
    dirs = ["/usr/local/bin", "/usr/bin"] + os.environ.get("PATH", "").split(os.pathsep)
    return list(dict.fromkeys(os.path.join(d, "aws") for d in dirs if d))


def aws_cli_v2(env: dict[str, str]) -> str:
    """The AWS CLI v2 (the one AWS's tutorials are written for): an `aws` that says aws-cli/2., else
    Debian's `awscli` package (v2: 2.9.19 in bookworm) from `apt-get install`, as root. Skips with
    apt-get's own words when it cannot be installed here (not root, no apt-get, no package)."""
    def found() -> str | None:
        return next((c for c in _v2_candidates() if os.access(c, os.X_OK) and _is_v2(c, env)), None)

    aws = found()
    if aws:
        return aws
    with _locked("awscli2"):
        aws = found()
        if aws:
            return aws
        if os.geteuid() != 0 or not shutil.which("apt-get"):
            pytest.skip("the AWS CLI v2 is missing and cannot be installed here (needs root and apt-get): "
                        "`apt-get install awscli` (Debian 12+) or AWS's installer")
        apt_env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        wait_for_lock = ["-o", f"DPkg::Lock::Timeout={APT_TIMEOUT_S}"]
        _install(["apt-get", *wait_for_lock, "update"], "the AWS CLI v2 cannot be installed", APT_TIMEOUT_S,
                 env=apt_env)
        _install(["apt-get", *wait_for_lock, "install", "-y", "--no-install-recommends", "awscli"],
                 "the AWS CLI v2 cannot be installed", APT_TIMEOUT_S, env=apt_env)
        aws = found()
        if not aws:  # an older distribution's awscli package is v1
            pytest.skip("`apt-get install awscli` installed no AWS CLI v2 (Debian 12 and later package v2, "
                        "older releases v1)")
        return aws


# --- The CDK --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Cdk:
    node: str          # a Node.js >= 20: the CLI and the app (`node app.js`) run on it
    cli: str           # node_modules/aws-cdk/bin/cdk
    node_modules: str  # aws-cdk-lib, constructs and esbuild, for the app's require() through NODE_PATH


def _node_major(node: str) -> int | None:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout
        return int(out.strip().lstrip("v").split(".")[0])
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def cdk_node() -> str:
    """`node` from the PATH when it is 22 or newer, else the Node.js 24 or 22 `make setup` puts in the
    project's node cache (kinesim/functions/runtimes.py), else a PATH `node` >= 20 (aws-cdk-lib's
    floor; the AWS SDK v3 inside the CLI warns that its 2027 releases need 22)."""
    from kinesim.functions import runtimes
    found = shutil.which("node")
    major = (_node_major(found) or 0) if found else 0
    if major >= PREFERRED_NODE:
        return found
    for cached_major in (24, 22):
        cached = runtimes.cached_node(cached_major)
        if cached:
            return cached
    if major >= CDK_MIN_NODE:
        return found
    pytest.skip(f"the CDK needs Node.js >= {CDK_MIN_NODE}: `node` on the PATH is {found or 'missing'} and the "
                "project's node cache has none (`python -m kinesim.functions.runtimes install 24`)")


def cdk() -> Cdk:
    """The CDK CLI, aws-cdk-lib, constructs and esbuild from npm, in the tools cache (`npm install` of
    a package.json written there: npm needs one to install into this directory and no parent).

    esbuild is there for NodejsFunction, which bundles locally only with an esbuild it finds (else
    in Docker): `require('esbuild/package.json')` from aws-cdk-lib (so this node_modules, or
    NODE_PATH) must give a 0.x version, and then it runs `npx --no-install esbuild` in the app's
    project root (the directory of its lockfile), which finds only a node_modules/.bin/esbuild in
    that directory or one above it. An app copied elsewhere therefore needs a package-lock.json and
    a link to these modules: `(app / "node_modules").symlink_to(cdk().node_modules)`. (With no
    esbuild in the workspace it would run an `esbuild` on the PATH instead.)"""
    node = cdk_node()
    if not NPM:
        pytest.skip("npm is not on the PATH: the CDK cannot be installed")
    # What the example app (examples/cdk-uploads, TypeScript) installs: the CLI, the library and
    # ts-node with TypeScript, at its versions; the tests link its node_modules here.
    example = json.loads((CDK_EXAMPLE / "package.json").read_text())
    packages = {**example["devDependencies"], **example["dependencies"], "esbuild": ESBUILD_VERSION}
    assert (packages["aws-cdk"], packages["aws-cdk-lib"]) == (CDK_CLI_VERSION, CDK_LIB_VERSION), packages
    with _locked("cdk") as home:
        key = hashlib.sha256(json.dumps(packages, sort_keys=True).encode()).hexdigest()[:12]
        root = home / f"cdk-{CDK_CLI_VERSION}-lib-{CDK_LIB_VERSION}-{key}"
        if not (root / ".kinesim-installed").exists():
            started = _start(root)
            root.mkdir(parents=True)
            (root / "package.json").write_text(json.dumps({
                "name": "kinesim-test-cdk", "private": True, "dependencies": packages}, indent=2))
            env = {**os.environ, "PATH": f"{Path(node).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
            _install([NPM, "install", "--no-audit", "--no-fund", "--no-update-notifier"],
                     f"the CDK {CDK_CLI_VERSION} cannot be installed", NPM_TIMEOUT_S, cwd=root, env=env)
            _note_install(root, started)
    return Cdk(node=node, cli=str(root / "node_modules" / "aws-cdk" / "bin" / "cdk"),
               node_modules=str(root / "node_modules"))


def cdk_python() -> Path:
    """A virtualenv with the example app's Python requirements (aws-cdk-lib for Python, which runs
    the CDK's JavaScript in Node.js through jsii): what `pip install -r requirements.txt` gives a
    user of examples/cdk-uploads/app.py. Measured: 31 s, 460 MB."""
    requirements = CDK_EXAMPLE / "requirements.txt"
    with _locked("cdk-python") as home:
        key = hashlib.sha256(requirements.read_bytes()).hexdigest()[:12]
        venv = home / f"cdk-python-{key}"
        if not (venv / ".kinesim-installed").exists():
            started = _start(venv)
            _install([sys.executable, "-m", "venv", str(venv)], "no virtualenv for the CDK's Python library", 120)
            _install([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                      "-r", str(requirements)], "the CDK's Python library cannot be installed", PIP_TIMEOUT_S)
            _note_install(venv, started)
        return venv


# --- Running a tool against a kinesim server ------------------------------------------------------

def tool_env(endpoint: str, home: Path, **extra: str) -> dict[str, str]:
    """The environment a user's shell would have after `export AWS_ENDPOINT_URL=...`: test
    credentials, the region, telemetry and update checks off, and HOME in a scratch directory (the
    tools write ~/.aws-sam, ~/.cdk, ~/.aws there). AWS_PROFILE and friends from the machine are
    dropped so nothing reaches a real account."""
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "CDK_", "SAM_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update({
        "HOME": str(home),
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_PAGER": "",
        "SAM_CLI_TELEMETRY": "0",
        "CDK_DISABLE_VERSION_CHECK": "1",
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        "CDK_HOME": str(home / ".cdk"),
    })
    env.update(extra)
    return env


def run_tool(cmd: list[str], env: dict[str, str], cwd: Path | None = None, timeout: float = 600,
             expect: int | None = 0) -> subprocess.CompletedProcess:
    """Run one tool command; fails the test with its whole output when it does not exit `expect`
    (None: any exit code, the caller checks)."""
    started = time.monotonic()
    try:
        res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                             stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"`{' '.join(cmd)}` timed out after {timeout:.0f}s\nstdout:\n{e.stdout}\nstderr:\n{e.stderr}")
    if expect is not None and res.returncode != expect:
        pytest.fail(f"`{' '.join(cmd)}` exited {res.returncode} (expected {expect}) after "
                    f"{time.monotonic() - started:.1f}s\nstdout:\n{res.stdout}\nstderr:\n{res.stderr}")
    return res


def output_of(res: subprocess.CompletedProcess) -> str:
    return f"exit {res.returncode}\nstdout:\n{res.stdout}\nstderr:\n{res.stderr}"


def server_info(url: str) -> dict:
    """The server's account, region and runnable Lambda runtimes (GET /_kinesim/health)."""
    with urllib.request.urlopen(f"{url}/_kinesim/health", timeout=10) as response:
        return json.loads(response.read())


def python_runtime(info: dict) -> str:
    """The Lambda runtime of the interpreter running the tests (`sam build` installs the function's
    requirements with it), which the server must be able to run."""
    runtime = f"python{sys.version_info.major}.{sys.version_info.minor}"
    assert runtime in info.get("runtimes", []), f"the server cannot run {runtime}: {info.get('runtimes')}"
    return runtime


def forwarded(sqs, queue_url: str, count: int, timeout: float = 120.0) -> list[dict]:
    """The first `count` JSON messages the test apps' functions forward to `queue_url` (each
    deleted once read), waiting with long polls."""
    bodies: list[dict] = []
    deadline = time.monotonic() + timeout
    while len(bodies) < count:
        assert time.monotonic() < deadline, f"{len(bodies)} of {count} records reached the queue: {bodies}"
        messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=2).get(
            "Messages", [])
        for message in messages:
            bodies.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    return bodies


def outputs_of(stack: dict) -> dict[str, str]:
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
