"""Starting and stopping the servers under test: kinesim (durable and --in-memory), kinesalite
and moto's server, each on a free port, each in its own session (so Ctrl-C in the terminal
reaches only the benchmark, which then stops them in order), each measured for CPU through
/proc/<pid>/stat of the whole process tree."""
from __future__ import annotations

import argparse

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from client import Client

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
PEERS_DIR = BENCH_DIR / ".peers"
VENV_BIN = REPO_DIR / ".venv" / "bin"
KINESALITE_CLI = PEERS_DIR / "node_modules" / "kinesalite" / "cli.js"
TARGETS = ("kinesim", "kinesim-mem", "kinesalite", "moto")
CLK_TCK = os.sysconf("SC_CLK_TCK")

_running: list["Server"] = []  # everything started and not yet stopped, for stop_all()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _venv_exe(name: str) -> str:
    exe = VENV_BIN / name
    return str(exe) if exe.exists() else (shutil.which(name) or name)


def ensure_kinesalite() -> None:
    """npm install kinesalite@3 into bench/.peers/ unless it is there already."""
    if KINESALITE_CLI.exists():
        return
    PEERS_DIR.mkdir(parents=True, exist_ok=True)
    print(f"installing kinesalite@3 into {PEERS_DIR} ...", file=sys.stderr, flush=True)
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(PEERS_DIR), "kinesalite@3"],
                   check=True, stdout=subprocess.DEVNULL)
    if not KINESALITE_CLI.exists():
        raise RuntimeError(f"npm install kinesalite@3 did not produce {KINESALITE_CLI}")


def command(name: str, port: int, data_dir: Path) -> list[str]:
    if name in ("kinesim", "kinesim-mem"):
        cmd = [_venv_exe("kinesim"), "serve", "--port", str(port), "--create-stream-ms", "0",
               "--delete-stream-ms", "0", "--update-stream-ms", "0", "--log-level", "warning"]
        return cmd + (["--in-memory"] if name == "kinesim-mem" else ["--data-dir", str(data_dir)])
    if name == "kinesalite":  # in-memory (memdown) without --path
        return ["node", str(KINESALITE_CLI), "--port", str(port), "--createStreamMs", "0",
                "--deleteStreamMs", "0", "--updateStreamMs", "0"]
    if name == "moto":
        return [_venv_exe("moto_server"), "-H", "127.0.0.1", "-p", str(port)]
    raise ValueError(f"unknown target {name!r} (known: {', '.join(TARGETS)})")


class Server:
    """One server under test, running as a subprocess on a free port."""

    poll_s = 0.1  # how often start() looks whether it is ready

    def __init__(self, name: str, work_dir: Path):
        self.name = name
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.dir = work_dir / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.dir / "server.log"
        self.proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    log_mode = "wb"  # a subclass that restarts a server appends ("ab"), keeping what it said before

    def command(self) -> list[str]:
        return command(self.name, self.port, self.dir / "data")

    def environment(self) -> dict[str, str] | None:
        """The server's environment (None: this process's)."""
        return None

    def start(self, timeout: float = 60.0) -> "Server":
        if self.name == "kinesalite":
            ensure_kinesalite()
        with open(self.log_path, self.log_mode) as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=self.dir, env=self.environment(),
                                         start_new_session=True)
        _running.append(self)
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _ready(self) -> bool:
        if self.name.startswith("kinesim"):
            with urllib.request.urlopen(self.endpoint + "/_kinesim/health", timeout=2) as r:
                return r.status == 200
        c = Client(self.endpoint, timeout=5)
        try:
            c.call("ListStreams", {})
            return True
        finally:
            c.close()

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with code {self.proc.returncode} before it was ready"
                                   f"\n{self.log_tail()}")
            try:
                if self._ready():
                    return
            except Exception:
                pass
            time.sleep(self.poll_s)
        raise TimeoutError(f"{self.name} not ready on {self.endpoint} after {timeout:.0f}s\n{self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(f"  {self.name}| {line}" for line in text[-lines:])

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def cpu_seconds(self) -> float:
        """utime+stime of the server and all its live descendants, plus reaped children."""
        return sum(_cpu_of(pid) for pid in _process_tree(self.pid))

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            _signal_group(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                _signal_group(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        else:  # the leader is gone; make sure nothing of its group lingers
            _signal_group(self.proc.pid, signal.SIGKILL)
        if self in _running:
            _running.remove(self)


def choices(parser: argparse.ArgumentParser, text: str, known, what: str) -> list[str]:
    """A comma list from the command line, each item one of `known` (else the parser's error)."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    for item in items:
        if item not in known:
            parser.error(f"unknown {what} {item!r} (known: {', '.join(known)})")
    return items


def run_steps(name: str, server: "Server", steps, log) -> dict:
    """Run `(label, step)` pairs against a started server, each step returning figures; a failing
    step is logged and recorded under "error" and the next one runs, unless the server died.
    Stops the server at the end, also on Ctrl-C."""
    figs: dict = {"endpoint": server.endpoint}
    try:
        for label, step in steps:
            log(f"{name}: {label}")
            try:
                figs.update(step())
            except (KeyboardInterrupt, SystemExit):
                raise
            except Exception as e:
                log(f"{name}: {label} FAILED: {type(e).__name__}: {e}")
                figs.setdefault("error", []).append(f"{label}: {type(e).__name__}: {e}")
                if not server.alive():
                    log(f"{name}: server died\n{server.log_tail()}")
                    break
        return figs
    finally:
        server.stop()
        log(f"{name}: stopped")


def _terminate(signum, frame):  # SIGTERM / SIGHUP: unwind like Ctrl-C so `finally` stops everything
    raise KeyboardInterrupt(f"signal {signum}")


def in_work_dir(prefix: str, body, log) -> int:
    """body(work_dir) in a new temporary directory; SIGTERM and SIGHUP unwind like Ctrl-C, and
    whatever happens every server started is stopped and the directory removed."""
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    work_dir = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        return body(work_dir)
    except KeyboardInterrupt:
        log("interrupted; stopping servers")
        return 130
    finally:
        stop_all()
        shutil.rmtree(work_dir, ignore_errors=True)


def stop_all() -> None:
    for server in list(reversed(_running)):
        try:
            server.stop()
        except Exception as e:  # keep stopping the others
            print(f"could not stop {server.name}: {e}", file=sys.stderr)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _read_stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except OSError:
        return None
    return data[data.rindex(")") + 2:].split()  # fields from 3 (state) on; comm may hold spaces


def _cpu_of(pid: int) -> float:
    f = _read_stat(pid)
    if f is None:
        return 0.0
    # utime, stime, cutime, cstime are fields 14-17 (1-based); f[0] is field 3
    return (int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])) / CLK_TCK


def _process_tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            f = _read_stat(int(entry))
            if f is not None:
                children.setdefault(int(f[1]), []).append(int(entry))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, ()))
    return tree
