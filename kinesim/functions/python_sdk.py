"""The Python packages AWS's `python3.X` runtimes put next to a function's code, for kinesim's
Python workers.

AWS's Python runtimes include the AWS SDK for Python (boto3) and its dependencies (botocore,
s3transfer, jmespath, python-dateutil, six, urllib3), in /var/lang/lib/python3.X/site-packages
since 3.11, and the runtime interface client with its own dependency, simplejson (awslambdaric's
requirements/base.txt; AWS confirms the RIC is bundled in the managed runtimes in
aws/aws-lambda-python-runtime-interface-client#180, and pip run inside Lambda reports
"awslambdaric ... requires simplejson" in #93). A worker gets exactly those and nothing else of
kinesim's venv: a directory of symlinks to the venv's copies. They are pure Python, so they load on
any interpreter their Requires-Python allows (simplejson falls back to pure Python where its C
speedups were built for another version); no second download, and always the boto3 the server
itself speaks. awslambdaric itself is not there: kinesim's worker.py plays its part.

Bytecode of those packages is compiled once per interpreter, next to the venv's own (`__pycache__/
*.cpython-313.pyc` beside pip's `*.cpython-311.pyc`), since workers write none: importing boto3
takes 0.5 s, not 1.2 s, on an interpreter the venv was not made with.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
import threading
from importlib import metadata
from pathlib import Path

PYTHON_SDK = ("boto3", "botocore", "s3transfer", "jmespath", "python-dateutil", "six", "urllib3", "simplejson")

_lock = threading.Lock()
_compiled: set[str] = set()
_built: str | None = None  # this process's sdk_dir(): the venv does not change under a running server


def home() -> Path:
    """Beside the node cache, in the venv kinesim runs from (`make clean` removes both); the user's
    cache directory when kinesim runs from a Python it cannot write to."""
    if os.environ.get("KINESIM_PYTHON_HOME"):
        return Path(os.environ["KINESIM_PYTHON_HOME"])
    if os.access(sys.prefix, os.W_OK):
        return Path(sys.prefix) / "kinesim-python"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kinesim" / "python"


def _entries() -> dict[str, str]:
    """{name in site-packages: its path in the venv} for the packages and .dist-info of PYTHON_SDK."""
    entries = {}
    for name in PYTHON_SDK:
        dist = metadata.distribution(name)
        for top in {f.parts[0] for f in dist.files or () if f.parts and f.parts[0] not in ("..", "__pycache__")}:
            entries[top] = str(dist.locate_file(top))
    return entries


def sdk_dir() -> str:
    """The directory a Python worker finds boto3 & co in (AWS's site-packages), built on first use.
    Its name is a digest of what it holds: a venv upgraded since gets a new one."""
    global _built
    if _built is not None and os.path.isdir(_built):
        return _built
    entries = _entries()
    digest = hashlib.sha256(repr(sorted(entries.items())).encode()).hexdigest()[:16]
    target = home() / f"site-packages-{digest}"
    with _lock:
        if not target.is_dir():
            target.parent.mkdir(parents=True, exist_ok=True)
            building = target.with_name(f"{target.name}.tmp-{os.getpid()}-{threading.get_ident()}")
            shutil.rmtree(building, ignore_errors=True)
            building.mkdir()
            for name, source in entries.items():
                os.symlink(source, building / name)
            try:
                os.rename(building, target)
            except OSError:  # another server built it meanwhile
                shutil.rmtree(building, ignore_errors=True)
    _built = str(target)
    return _built


_COMPILE = """
import compileall, os, sys
root = sys.argv[1]
for name in sorted(os.listdir(root)):
    path = os.path.join(root, name)
    if name.endswith('.py'):
        compileall.compile_file(path, quiet=2)
    elif os.path.isdir(path) and not name.endswith('-info'):
        compileall.compile_dir(path, quiet=2)
"""


def compile_for(interpreter: str, sdk_dir: str) -> None:
    """Byte-compile the SDK directory for `interpreter` (through its symlinks, into the venv's
    __pycache__ directories), once per interpreter and directory (a stamp file records it)."""
    key = hashlib.sha256(f"{os.path.realpath(interpreter)}\0{sdk_dir}".encode()).hexdigest()[:16]
    stamp = home() / f".compiled-{key}"
    if key in _compiled:
        return
    with _lock:
        if key in _compiled or stamp.exists():
            _compiled.add(key)
            return
        # A file that does not compile (syntax of a newer Python) is left to the import to report
        subprocess.run([interpreter, "-I", "-S", "-c", _COMPILE, sdk_dir], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=300)
        stamp.touch()
        _compiled.add(key)


@functools.lru_cache(maxsize=1)
def oldest_minor() -> int:
    """The oldest Python 3 minor version every package of the SDK supports (their Requires-Python):
    boto3 1.40+ needs 3.10, so a python3.9 function runs on a newer interpreter."""
    oldest = 9
    for name in PYTHON_SDK:
        match = re.search(r">=\s*3\.(\d+)", metadata.distribution(name).metadata.get("Requires-Python") or "")
        if match:
            oldest = max(oldest, int(match.group(1)))
    return oldest

