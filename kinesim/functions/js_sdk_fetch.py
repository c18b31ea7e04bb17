"""The AWS SDK for JavaScript v3 packages a Node.js function needs, installed on first use.

AWS's Node.js runtimes have every package of the SDK; kinesim installs a selection at set-up
(runtime_sdks.py) and the others when a function's code imports them: `sdk_imports` finds the
`@aws-sdk/*` and `@smithy/*` packages its .js, .mjs and .cjs files import (`require`, `import`,
`import()`, `export ... from`; its own node_modules are not read, but the non-optional
peerDependencies of the packages in them are, and those of its layers' packages) that neither
its node_modules nor its layers hold. `FETCHER` installs those not installed yet in the background,
one npm run per package, each once at a time; CreateFunction answers with State Pending and
UpdateFunctionCode / UpdateFunctionConfiguration with LastUpdateStatus InProgress while it runs
(functions_api.py), as AWS does while it sets a function up, and a cold start waits for it
(bounded: FETCH_WAIT_S). A package that could not be installed (no network, no npm) leaves a
warning first in the function's log stream, and the handler's failed import becomes a
Runtime.ImportModuleError that says what is missing and what to do (`explain`). A failed install
is tried again at the next need, RETRY_AFTER_S later.
"""
from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from typing import Callable, Iterable

from . import runtime_sdks, runtimes

log = logging.getLogger("kinesim.functions")

FETCH_WAIT_S = 45.0       # a cold start waits this long for its packages (boto3's read timeout is 60 s)
RETRY_AFTER_S = 30.0      # a failed install is tried again after this, when a function needs it
MAX_PARALLEL_INSTALLS = 4
MAX_SCAN_BYTES = 64 << 20  # what is read of a function's code: a bundle is a few MB
MAX_SCAN_FILE_BYTES = 16 << 20
MAX_MANIFESTS = 5000       # package.json files read in node_modules directories
SOURCE_SUFFIXES = (".js", ".mjs", ".cjs")

# require('x'), import ... from 'x', import 'x', import('x'), export ... from 'x' (and bundlers'
# __require('x')) of a package of the SDK's scopes, or a file in one
_IMPORT = re.compile(rb"""(?:require\s*\(\s*|\bfrom\s*|\bimport\s*\(?\s*)(['"`])"""
                     rb"""(@(?:aws-sdk|smithy)/[a-z0-9][a-z0-9._-]*)(?:/[^'"`\s]*)?\1""")
_NODE_RUNTIME = re.compile(r"nodejs(\d+)\.x\Z")
# Node.js's errors for a package it cannot find, from require() and from import
_NOT_FOUND = re.compile(r"Cannot find (?:module|package) '(@(?:aws-sdk|smithy)/[a-z0-9][a-z0-9._-]*)(?:/[^']*)?'")


def sdk_imports(code_dir: str, layer_dirs: Iterable[str] = (), node_major: int | None = None) -> list[str]:
    """The SDK packages (`@aws-sdk/client-transcribe`) the function's code imports and that
    neither its own node_modules nor its layers' hold, sorted."""
    layers = [d for d in layer_dirs if d]
    module_dirs = [os.path.join(code_dir, "node_modules"), *runtimes.node_layer_paths(layers, node_major)]
    wanted = _imported_by_sources(code_dir)
    manifests = [MAX_MANIFESTS]
    for directory in module_dirs:
        wanted |= _peers_of_packages(directory, manifests)
    return sorted(name for name in wanted
                  if runtime_sdks.SDK_PACKAGE.match(name)
                  and not any(os.path.isdir(os.path.join(d, name)) for d in module_dirs))


def _imported_by_sources(code_dir: str) -> set[str]:
    found: set[str] = set()
    budget = MAX_SCAN_BYTES
    for root, dirs, files in os.walk(code_dir):
        dirs[:] = sorted(d for d in dirs if d != "node_modules" and not d.startswith("."))
        for name in sorted(files):
            if not name.endswith(SOURCE_SUFFIXES):
                continue
            path = os.path.join(root, name)
            try:
                if os.path.getsize(path) > MAX_SCAN_FILE_BYTES:
                    continue
                with open(path, "rb") as f:
                    text = f.read(budget)
            except OSError:
                continue
            budget -= len(text)
            found.update(m.group(2).decode() for m in _IMPORT.finditer(text))
            if budget <= 0:
                log.warning("kinesim read the first %d MB of the code in %s for the AWS SDK packages it imports",
                            MAX_SCAN_BYTES >> 20, code_dir)
                return found
    return found


def _peers_of_packages(node_modules: str, budget: list[int]) -> set[str]:
    """The SDK packages that the (non-SDK) packages in a node_modules directory declare as
    non-optional peerDependencies: libraries that expect the runtime's SDK."""
    found: set[str] = set()
    try:
        entries = sorted(os.listdir(node_modules))
    except OSError:
        return found
    packages = []
    for entry in entries:
        if entry.startswith("."):
            continue
        if entry.startswith("@"):
            if entry in ("@aws-sdk", "@smithy"):  # the SDK's own packages come with what they need
                continue
            try:
                packages += [os.path.join(entry, p) for p in sorted(os.listdir(os.path.join(node_modules, entry)))]
            except OSError:
                continue
        else:
            packages.append(entry)
    for package in packages:
        if budget[0] <= 0:
            break
        budget[0] -= 1
        try:
            with open(os.path.join(node_modules, package, "package.json"), "rb") as f:
                manifest = json.load(f)
            peers = manifest.get("peerDependencies") or {}
            optional = manifest.get("peerDependenciesMeta") or {}
            found.update(name for name in peers if isinstance(name, str)
                         and not (optional.get(name) or {}).get("optional"))
        except (OSError, ValueError, AttributeError, TypeError):
            continue
    return found


class _Outcome:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: str | None = None
        self.permanent = False  # npm has no such package of the SDK: not tried again
        self.finished = 0.0


class JsSdkFetcher:
    """Installs SDK packages on first use (runtime_sdks.install_js_package), in background threads:
    each package once at a time in this process (and, through its lock file, on this machine);
    remembers what failed and why. Thread-safe."""

    def __init__(self, install: Callable[[str], object] | None = None):
        self._install = install or (lambda name: runtime_sdks.install_js_package(name, say=log.info))
        self._lock = threading.Lock()
        self._outcomes: dict[str, _Outcome] = {}
        self._slots = threading.BoundedSemaphore(MAX_PARALLEL_INSTALLS)
        self._scans: dict[tuple, list[str]] = {}

    def needed(self, fn: dict) -> list[str]:
        """The SDK packages a Node.js function (a stored configuration: CodeDir, LayerDirs) imports
        that its package and layers do not hold. Cached per code and layers, except for a
        hot-reloaded directory, which changes in place."""
        code_dir = fn.get("CodeDir")
        node = _NODE_RUNTIME.match(fn.get("Runtime") or "")
        if not code_dir or node is None:
            return []
        major = int(node.group(1))
        key = (code_dir, tuple(fn.get("LayerDirs") or ()), major)
        with self._lock:
            cached = None if fn.get("HotReload") else self._scans.get(key)
        if cached is not None:
            return cached
        names = sdk_imports(code_dir, fn.get("LayerDirs") or (), major)
        if not fn.get("HotReload"):
            with self._lock:
                if len(self._scans) > 1000:
                    self._scans.clear()
                self._scans[key] = names
        return names

    def missing(self, names: Iterable[str]) -> list[str]:
        """Those of `names` not installed now, less those npm does not have (they never will be)."""
        with self._lock:
            permanent = {n for n, o in self._outcomes.items() if o.permanent}
        return [n for n in names if n not in permanent and not runtime_sdks.js_package_installed(n)]

    def fetch(self, names: Iterable[str], then: Callable[[], None] | None = None) -> list[str]:
        """Install whichever of `names` are missing, in the background (a package being installed
        is not installed twice; one that failed less than RETRY_AFTER_S ago is not tried again
        yet). `then` is called, in a background thread, once all of them have finished. Returns
        those missing."""
        missing = self.missing(names)
        events = []
        with self._lock:
            for name in missing:
                outcome = self._outcomes.get(name)
                if outcome is None or (outcome.done.is_set() and not outcome.permanent
                                       and time.monotonic() - outcome.finished >= RETRY_AFTER_S):
                    outcome = self._outcomes[name] = _Outcome()
                    threading.Thread(target=self._run, args=(name, outcome), name=f"kinesim-npm {name}",
                                     daemon=True).start()
                events.append(outcome.done)
        if then is not None:
            def wait_then() -> None:
                for event in events:
                    event.wait()
                then()
            threading.Thread(target=wait_then, name="kinesim-npm-wait", daemon=True).start()
        return missing

    def _run(self, name: str, outcome: _Outcome) -> None:
        try:
            with self._slots:
                self._install(name)
        except runtime_sdks.NotInSdk as e:
            outcome.error, outcome.permanent = str(e), True
        except Exception as e:  # noqa: BLE001 - reported to the function that needs it
            outcome.error = str(e).split("\n", 1)[0].rstrip(".")
            log.warning("kinesim could not install %s: %s", name, e)
        finally:
            outcome.finished = time.monotonic()
            outcome.done.set()

    def wait(self, names: Iterable[str], timeout: float) -> dict[str, str]:
        """Wait (up to `timeout` seconds in all) for the installs of `names`; returns those still
        missing, each with why."""
        deadline = time.monotonic() + timeout
        unavailable = {}
        for name in names:
            with self._lock:
                outcome = self._outcomes.get(name)
            if outcome is not None:
                outcome.done.wait(max(0.0, deadline - time.monotonic()))
            if runtime_sdks.js_package_installed(name):
                continue
            if outcome is None:
                unavailable[name] = "it was not installed"
            elif not outcome.done.is_set():
                unavailable[name] = f"it was still being installed from npm after {timeout:.0f} s"
            else:
                unavailable[name] = outcome.error or "it was not installed"
        return unavailable

    def prepare(self, fn: dict, timeout: float = FETCH_WAIT_S) -> dict[str, str]:
        """At a cold start: install what the function needs and is missing, waiting up to
        `timeout`; returns what is still missing, each with why (nothing, almost always)."""
        needed = self.needed(fn)
        if not needed:
            return {}
        missing = self.fetch(needed)
        unavailable = self.wait(missing, timeout) if missing else {}
        with self._lock:
            unavailable.update({n: o.error or "" for n, o in self._outcomes.items() if n in needed and o.permanent})
        return unavailable


FETCHER = JsSdkFetcher()


def warning(unavailable: dict[str, str]) -> str:
    """The line first in a cold start's log stream when packages are missing."""
    return "".join(f"kinesim: WARNING: {name} is not installed: {why}. {_advice(name, why)}\n"
                   for name, why in sorted(unavailable.items()))


def _advice(name: str, why: str) -> str:
    if "do not include it either" in why:
        return "Include it in the function's package (node_modules) or a layer."
    return (f"AWS's Node.js runtimes include it (AWS SDK for JavaScript v3 {runtime_sdks.JS_SDK_VERSION}) and kinesim "
            f"installs it from the npm registry on first use: with the registry reachable, a cold start "
            f"{RETRY_AFTER_S:.0f} s later tries again, or run "
            f"`python -m kinesim.functions.runtime_sdks install {name}`; or include it in the function's package "
            "or a layer.")


def explain(error: dict, unavailable: dict[str, str]) -> dict | None:
    """A failed init's error ({errorType, errorMessage, trace}) naming a package in `unavailable`,
    as the Runtime.ImportModuleError it is, with what is missing and what to do; None when the
    error is about something else."""
    message = error.get("errorMessage")
    match = _NOT_FOUND.search(message) if isinstance(message, str) else None
    if match is None or match.group(1) not in unavailable:
        return None
    name = match.group(1)
    why = unavailable[name]
    if error.get("errorType") != "Runtime.ImportModuleError":  # import's ERR_MODULE_NOT_FOUND: an Error
        message = f"{error.get('errorType') or 'Error'}: {message}"
    return {**error, "errorType": "Runtime.ImportModuleError",
            "errorMessage": f"{message}\nkinesim: {name} is not installed: {why}. {_advice(name, why)}"}
