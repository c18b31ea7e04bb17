"""A health probe for tests of hostile requests: while one runs, another client calls ListStreams
every 100 ms and the server's resident memory is read as often, so a test can show that the
request held neither the other clients nor the machine's memory.

The probe records what it saw (the longest ListStreams, the most memory, how many calls were
answered); tests assert with generous bounds (a loaded CI machine is slow, never stuck).
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

from conftest import client_for

INTERVAL = 0.1


def resident_bytes(pid: int) -> int:
    """The process's resident set (VmRSS), 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def peak_resident_bytes(pid: int) -> int:
    """The most the process has had resident so far (VmHWM): what a request cost it shows after the
    request, however briefly it held that memory."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")


class HealthProbe:
    """`with HealthProbe(server) as probe: <hostile request>`, then read probe.longest_call,
    probe.peak_rss, probe.answered."""

    def __init__(self, server) -> None:
        self.kinesis = client_for(server.url, read_timeout=120)
        self.pid = server.proc.pid
        self.longest_call = 0.0
        self.peak_rss = resident_bytes(self.pid)
        self.answered = 0
        self.errors: list[Exception] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "HealthProbe":
        self.kinesis.list_streams()  # connected and warm before the hostile request starts
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=180)
        assert not self._thread.is_alive(), "a ListStreams of the probe did not come back in 180 s"

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.kinesis.list_streams()
                self.answered += 1
            except Exception as err:  # noqa: BLE001 - reported by the test
                self.errors.append(err)
            self.longest_call = max(self.longest_call, time.monotonic() - started)
            self.peak_rss = max(self.peak_rss, resident_bytes(self.pid))
            self._stop.wait(INTERVAL)

    def assert_healthy(self, longest: float = 10.0, rss: int = 500 << 20) -> None:
        """Every probe answered, none waited past `longest` seconds, memory stayed under `rss`."""
        assert not self.errors, f"ListStreams failed beside the request: {self.errors[:3]}"
        assert self.longest_call < longest, f"a ListStreams waited {self.longest_call:.1f} s beside the request"
        assert self.peak_rss < rss, f"the server grew to {self.peak_rss >> 20} MB"
