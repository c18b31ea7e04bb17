"""Installing a test's node packages once: `npm ci` when node_modules is missing or older than the
package files (shared by the Node SDK and browser tests)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

NODE = shutil.which("node")
NPM = shutil.which("npm")
NPM_TIMEOUT_S = 300


def newer_than(target: Path, inputs: list[Path]) -> bool:
    return target.exists() and target.stat().st_mtime >= max(p.stat().st_mtime for p in inputs if p.exists())


def ensure_node_modules(directory: Path) -> Path:
    """`npm ci` in `directory` (its package-lock.json is committed) unless its install is current;
    returns npm's install stamp, whose time says when."""
    stamp = directory / "node_modules" / ".package-lock.json"  # npm writes it on every install
    if newer_than(stamp, [directory / "package.json", directory / "package-lock.json"]):
        return stamp
    cmd = [NPM, "ci", "--no-audit", "--no-fund"]
    try:
        res = subprocess.run(cmd, cwd=directory, capture_output=True, text=True, timeout=NPM_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(cmd)} timed out after {NPM_TIMEOUT_S}s\nstdout:\n{e.stdout}\nstderr:\n{e.stderr}")
    if res.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} failed ({res.returncode})\nstdout:\n{res.stdout}\nstderr:\n{res.stderr}")
    os.utime(stamp)  # npm ci may keep an old mtime: mark this install as current
    return stamp
