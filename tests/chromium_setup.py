"""Debian's Chromium for the browser tests (tests/test_browser.py, the web console's tests): the one
on PATH, else installed with apt-get when running as root. A test skips only when Chromium cannot
be had here (not root, no apt-get, or apt-get failed); apt-get is bounded by APT_TIMEOUT_S per step
and waits for the dpkg lock (another test process may be installing it at the same time)."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

APT_TIMEOUT_S = 900


def run_bounded(cmd: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
    """`cmd`'s outcome; one that outlives `timeout` seconds is killed and reported as exit code -1."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(cmd, -1, e.stdout or "", f"{e.stderr or ''}\ntimed out after {timeout}s")


def chromium() -> str:
    """Debian's chromium: on PATH, else installed with apt-get (root only); skips when it cannot be had."""
    found = shutil.which("chromium")
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("Chromium is missing and cannot be installed here (needs root and apt-get): "
                    "`apt-get install chromium` to run the browser tests")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    wait_for_lock = ["-o", f"DPkg::Lock::Timeout={APT_TIMEOUT_S}"]
    for cmd in (["apt-get", *wait_for_lock, "update"],
                ["apt-get", *wait_for_lock, "install", "-y", "--no-install-recommends", "chromium"]):
        res = run_bounded(cmd, APT_TIMEOUT_S, env=env)
        if res.returncode != 0:
            pytest.skip(f"Chromium is missing and `{' '.join(cmd)}` failed ({res.returncode}): "
                        f"{(res.stderr or res.stdout).strip()[-600:]}")
    found = shutil.which("chromium")
    if not found:
        pytest.fail("apt-get installed chromium but no `chromium` is on PATH")
    return found
