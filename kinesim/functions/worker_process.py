"""One execution environment's process, seen from the server: the worker (worker.py, or
node/bootstrap.mjs) in a session of its own, the socket to it, how it ended in AWS's words."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from multiprocessing.connection import Connection
from typing import Any

from .worker import pack, unpack


class WorkerProcess:
    """One execution environment: a worker process, the socket to it, its log stream."""

    def __init__(self, command: list[str], code_dir: str, env: dict[str, str], stream_name: str,
                 capture_output: bool = False):
        """Run `command CHANNEL_FD` (and `OUTPUT_FD` with `capture_output`: the non-blocking read
        end of a pipe its stdout and stderr write into, for a worker that cannot redirect its own
        file descriptors, as Node.js cannot)."""
        parent, child = socket.socketpair()
        out_read = out_write = None
        try:
            fds = [child.fileno()]
            if capture_output:
                out_read, out_write = os.pipe()
                os.set_blocking(out_read, False)
                fds.append(out_read)
            # A session of its own: Ctrl-C on the server is not the handler's, and killing the group
            # also ends the handler's subprocesses.
            self.proc = subprocess.Popen(
                command + [str(fd) for fd in fds], cwd=code_dir, env=env, stdin=subprocess.DEVNULL,
                stdout=out_write, stderr=out_write, pass_fds=tuple(fds), start_new_session=True)
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
            for fd in (out_read, out_write):
                if fd is not None:
                    os.close(fd)
        self.conn = Connection(parent.detach())
        self.stream_name = stream_name
        self.started = time.perf_counter()
        self.init_ms: float | None = None
        self.rss_kb = 0
        self.warning: str | None = None  # runs on another language version than the one asked for
        self.sdk_unavailable: dict[str, str] = {}  # SDK packages its code imports that are not installed, and why
        self.last_log_ms = 0  # events keep time order within the stream
        self.alive = True
        self.cold_start_log: Any = None  # the cold start's log (runtime.py's), continued by the first invocation

    def send(self, header: dict, body: bytes) -> None:
        try:
            self.conn.send_bytes(pack(header, body))
        except OSError:  # the worker died: its exit is the invocation's error
            raise EOFError from None

    def receive(self, deadline: float) -> tuple[dict, bytes]:
        remaining = deadline - time.perf_counter()
        try:
            ready = remaining > 0 and self.conn.poll(remaining)
            if ready:
                return unpack(self.conn.recv_bytes())
        except OSError:  # (TimeoutError is one too: raised below, outside this)
            raise EOFError from None
        raise TimeoutError

    def peak_rss_kb(self) -> int:
        """Peak memory of a worker that cannot report it any more (timed out or crashed)."""
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return max(int(line.split()[1]), self.rss_kb)
        except (OSError, ValueError):
            pass
        return self.rss_kb

    def kill(self) -> None:
        """SIGKILL the worker and its subprocesses, as Lambda does. The thread using it sees EOF."""
        self.alive = False
        if self.proc.returncode is not None:  # reaped: its pid may belong to another process now
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _exited(self) -> bool:
        """Whether the worker has exited, without reaping it: until reaped, its pid (the group id
        that `kill` signals) cannot be reused."""
        try:
            return os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    def stop(self, grace_s: float = 0) -> str:
        """Kill the worker (after `grace_s` to exit by itself) and reap it. Returns how it ended in
        AWS's words: "Runtime exited with error: exit status 1" and the like."""
        deadline = time.monotonic() + grace_s
        while not self._exited() and time.monotonic() < deadline:
            time.sleep(0.002)
        self.kill()  # its subprocesses too, even when it has exited itself
        code = self.proc.wait()
        self.conn.close()
        if code == 0:
            return "Runtime exited without providing a reason"
        if code > 0:
            return f"Runtime exited with error: exit status {code}"
        return f"Runtime exited with error: signal: {_signal_name(-code)}"


def _signal_name(number: int) -> str:
    """Go's names for signals, which Lambda's messages use ("signal: killed")."""
    names = {signal.SIGKILL: "killed", signal.SIGSEGV: "segmentation fault", signal.SIGABRT: "aborted",
             signal.SIGTERM: "terminated", signal.SIGBUS: "bus error", signal.SIGFPE: "floating point exception",
             signal.SIGILL: "illegal instruction", signal.SIGINT: "interrupt", signal.SIGPIPE: "broken pipe"}
    try:
        return names.get(signal.Signals(number)) or (signal.strsignal(number) or f"signal {number}").lower()
    except ValueError:
        return f"signal {number}"
