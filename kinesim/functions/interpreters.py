"""Which Python interpreter a `python3.X` function runs on. AWS runs it on Python 3.X; kinesim runs
it on a Python 3.X of this machine when there is one, else on the closest version it has (with a
warning in the function's log), never on one older than the worker and the boto3 it is given support.

Where interpreters are looked for, in this order: the server's own; `python3.X` on the PATH
(shims of version managers skipped: they dispatch to the directories below); pyenv's
`$PYENV_ROOT/versions/3.X.*` (default ~/.pyenv); uv's managed Pythons
(`$UV_PYTHON_INSTALL_DIR`, default `$XDG_DATA_HOME/uv/python` or ~/.local/share/uv/python,
`cpython-3.X.*`). Each candidate is asked its version once (cached by path and mtime).
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass

OLDEST_MINOR = 9  # worker.py runs on Python 3.9 and later
_ASK_VERSION = "import sys; print('%d.%d.%d' % sys.version_info[:3])"


@dataclass(frozen=True)
class Interpreter:
    path: str
    version: tuple[int, int, int]

    @property
    def minor(self) -> int:
        return self.version[1]

    @property
    def label(self) -> str:
        return "Python " + ".".join(map(str, self.version))


@dataclass(frozen=True)
class Choice:
    wanted: int                    # the 3.X a function's Runtime asks for
    interpreter: Interpreter
    oldest: int = OLDEST_MINOR     # the oldest 3.X that could run it

    @property
    def exact(self) -> bool:
        return self.interpreter.minor == self.wanted

    def why(self) -> str | None:
        """Why it is not the version asked for, or None when it is."""
        if self.exact:
            return None
        if self.wanted < self.oldest:
            return f"the boto3 functions are given needs Python 3.{self.oldest} or later"
        return f"this machine has no Python 3.{self.wanted} (looked on the PATH, in pyenv's and uv's Pythons)"

    def warning(self) -> str | None:
        """The first line of a worker's log stream when it is not the version asked for."""
        why = self.why()
        if why is None:
            return None
        return (f"kinesim: WARNING: python3.{self.wanted} runs on {self.interpreter.label} ({self.interpreter.path}): "
                f"{why}. Functions can behave differently on another Python version than on AWS's.\n")


_versions: dict[tuple[str, int], tuple[int, int, int] | None] = {}
_lock = threading.Lock()


def _version_of(path: str) -> tuple[int, int, int] | None:
    try:
        real = os.path.realpath(path)
        key = (real, os.stat(real).st_mtime_ns)
    except OSError:
        return None
    with _lock:
        if key not in _versions:
            try:
                out = subprocess.run([real, "-I", "-S", "-c", _ASK_VERSION], capture_output=True, text=True,
                                     timeout=20, stdin=subprocess.DEVNULL).stdout
                major, minor, micro = (int(p) for p in out.strip().split("."))
                _versions[key] = (major, minor, micro)
            except (OSError, ValueError, subprocess.SubprocessError):
                _versions[key] = None
        return _versions[key]


def _server_interpreter() -> str:
    # The base interpreter, not the venv's: with -I -S both see only the standard library, and the
    # base one has no pyvenv.cfg pointing at kinesim's venv.
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def _on_path(minor: int) -> list[str]:
    found = []
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not directory or os.path.basename(os.path.normpath(directory)) == "shims":
            continue
        path = shutil.which(f"python3.{minor}", path=directory)
        if path:
            found.append(path)
    return found


def _pyenv(minor: int) -> list[str]:
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    return sorted(glob.glob(os.path.join(glob.escape(root), "versions", f"3.{minor}.*", "bin", f"python3.{minor}")),
                  reverse=True)


def _uv(minor: int) -> list[str]:
    root = os.environ.get("UV_PYTHON_INSTALL_DIR") or os.path.join(
        os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share"), "uv", "python")
    return sorted(glob.glob(os.path.join(glob.escape(root), f"cpython-3.{minor}.*", "bin", f"python3.{minor}")),
                  reverse=True)


def find(minor: int) -> Interpreter | None:
    """A Python 3.`minor` of this machine, or None."""
    server = _server_interpreter()
    candidates = ([server] if sys.version_info[:2] == (3, minor) else []) + _on_path(minor) + _pyenv(minor) + _uv(minor)
    for path in candidates:
        version = _version_of(path)
        if version is not None and version[:2] == (3, minor):
            return Interpreter(path, version)
    return None


def available(oldest: int, newest: int) -> list[Interpreter]:
    """Every Python 3.`oldest` ... 3.`newest` this machine has, one per minor version."""
    found = (find(minor) for minor in range(oldest, newest + 1))
    return [i for i in found if i is not None]


def choose(minor: int, oldest: int = OLDEST_MINOR) -> Choice:
    """The interpreter for a `python3.minor` function: that version, or the closest one from
    3.`oldest` on (the newer of two as close: code written for 3.10 more likely runs on 3.11 than
    on 3.9). The server's own interpreter is always one (kinesim needs a newer Python than any
    `oldest`), so there is always a choice."""
    oldest = max(oldest, OLDEST_MINOR)
    exact = find(minor) if minor >= oldest else None
    if exact is not None:
        return Choice(minor, exact, oldest)
    others = available(oldest, max(minor, sys.version_info[1]) + 1)
    best = min(others, key=lambda i: (abs(i.minor - minor), -i.minor))
    return Choice(minor, best, oldest)
