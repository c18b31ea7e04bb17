#!/usr/bin/env python3
"""How fast each server answers its first call after launch, and how much memory it holds idle:
kinesim against kinesalite and moto's server, in one run, on this machine.

    .venv/bin/python bench/startup.py                     # 5 rounds, kinesim, kinesalite, moto
    .venv/bin/python bench/startup.py --runs 9 --idle 5 --targets kinesim,kinesim-mem,kinesalite

Each round starts every target once, in turn (so that a load change on the machine reaches every
target alike), each on a free port with an empty data directory and alone:

- first answer: from just before the process is launched to the first successful ListStreams
  (a Kinesis JSON call, as a client's first call would be), polled every 5 ms, connection refusals
  and errors retried;
- idle memory: after `--idle` seconds without a request, the resident memory of the server and
  of every process it started (RSS summed over the tree; PSS, which shares pages between forked
  processes fairly, beside it), and how many processes that tree has.

The medians over the rounds are printed with each target's ratio to kinesalite's.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from client import Client  # noqa: E402
from peers import TARGETS, Server, _process_tree, choices, ensure_kinesalite, in_work_dir  # noqa: E402

POLL_S = 0.005
T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


class TimedServer(Server):
    """A server whose readiness is its first ListStreams answer, noted the moment it arrives."""

    launched = answered = 0.0
    poll_s = POLL_S  # its first answer, timed to a few milliseconds

    def start(self, timeout: float = 60.0) -> "TimedServer":
        self.launched = time.monotonic()
        return super().start(timeout)

    def _ready(self) -> bool:
        c = Client(self.endpoint, timeout=5)
        try:
            c.call("ListStreams", {})
            self.answered = time.monotonic()
            return True
        finally:
            c.close()


def _kib(pid: int, path: str, field: str) -> int:
    """A `Field:   123 kB` line of a /proc file, in KiB (0 if the process is gone)."""
    try:
        with open(f"/proc/{pid}/{path}") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def tree_memory(pid: int) -> dict:
    tree = _process_tree(pid)
    return {"rss_mb": sum(_kib(p, "status", "VmRSS") for p in tree) / 1024,
            "pss_mb": sum(_kib(p, "smaps_rollup", "Pss") for p in tree) / 1024,
            "processes": len(tree)}


def measure(name: str, work_dir: Path, idle_s: float) -> dict:
    server = TimedServer(name, work_dir)
    server.start()
    try:
        figs = {"first_answer_s": server.answered - server.launched}
        time.sleep(idle_s)  # idle: nothing is asked of the server meanwhile
        figs.update(tree_memory(server.pid))
        return figs
    finally:
        server.stop()


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def report(results: dict[str, list[dict]], targets: list[str], runs: int, idle_s: float) -> None:
    med = {t: {k: statistics.median(r[k] for r in results[t]) for k in results[t][0]} for t in targets}
    base = med.get("kinesalite")
    print(f"\nstart-up: medians of {runs} alternating rounds; memory after {idle_s:g} s idle")
    print(f"{'target':<12} {'first answer':>13} {'idle RSS':>10} {'idle PSS':>10} {'processes':>10}"
          + ("   ratio to kinesalite (answer, RSS)" if base else ""))
    for t in targets:
        m = med[t]
        line = (f"{t:<12} {m['first_answer_s']:>11.3f} s {m['rss_mb']:>7.1f} MB {m['pss_mb']:>7.1f} MB "
                f"{m['processes']:>10g}")
        if base:
            line += f"   {_ratio(m['first_answer_s'], base['first_answer_s'])}, {_ratio(m['rss_mb'], base['rss_mb'])}"
        print(line)
    spread = {t: (min(r["first_answer_s"] for r in results[t]), max(r["first_answer_s"] for r in results[t]))
              for t in targets}
    print("first answer, min - max: " + "; ".join(f"{t} {lo:.3f} - {hi:.3f} s" for t, (lo, hi) in spread.items()))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--targets", default="kinesim,kinesalite,moto", help="comma list out of " + ",".join(TARGETS))
    p.add_argument("--runs", type=int, default=5, help="rounds (each starts every target once)")
    p.add_argument("--idle", type=float, default=5.0, help="seconds idle before memory is read")
    args = p.parse_args(argv)
    targets = choices(p, args.targets, TARGETS, "target")
    if "kinesalite" in targets:
        ensure_kinesalite()  # not inside the timed launch

    def body(work_dir: Path) -> int:
        results: dict[str, list[dict]] = {t: [] for t in targets}
        for run in range(args.runs):
            for t in targets:
                figs = measure(t, work_dir / f"run{run}", args.idle)
                log(f"round {run + 1}/{args.runs} {t}: first answer {figs['first_answer_s']:.3f} s, "
                    f"RSS {figs['rss_mb']:.1f} MB, PSS {figs['pss_mb']:.1f} MB, {figs['processes']} processes")
                results[t].append(figs)
        report(results, targets, args.runs, args.idle)
        return 0

    return in_work_dir("kinesim-startup-", body, log)


if __name__ == "__main__":
    sys.exit(main())
