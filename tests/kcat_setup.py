"""Debian's kcat for the Kafka tools' tests (tests/test_kafka_tools.py): the one on PATH, else
installed with apt-get when running as root, as tests/chromium_setup.py does for Chromium. Its
librdkafka (Debian's 2.0.2) is older than confluent-kafka's bundled one: a second librdkafka
version against the Kafka port. A test skips only when kcat cannot be had here."""
from __future__ import annotations

import os
import shutil

import pytest

from chromium_setup import APT_TIMEOUT_S, run_bounded


def kcat() -> str:
    found = shutil.which("kcat")
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("kcat is missing and cannot be installed here (needs root and apt-get): "
                    "`apt-get install kcat` to run the kcat tests")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    wait_for_lock = ["-o", f"DPkg::Lock::Timeout={APT_TIMEOUT_S}"]
    install = ["apt-get", *wait_for_lock, "install", "-y", "--no-install-recommends", "kcat"]
    if run_bounded(install, APT_TIMEOUT_S, env=env).returncode != 0:
        # Package lists missing or stale (a fresh container): fetch them, then once more.
        for cmd in (["apt-get", *wait_for_lock, "update"], install):
            res = run_bounded(cmd, APT_TIMEOUT_S, env=env)
            if res.returncode != 0:
                pytest.skip(f"kcat is missing and `{' '.join(cmd)}` failed ({res.returncode}): "
                            f"{(res.stderr or res.stdout).strip()[-600:]}")
    found = shutil.which("kcat")
    if not found:
        pytest.fail("apt-get installed kcat but no `kcat` is on PATH")
    return found
