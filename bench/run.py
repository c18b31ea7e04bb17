#!/usr/bin/env python3
"""Benchmark kinesim against kinesalite and moto's server, in one run, on this machine.

    .venv/bin/python bench/run.py                      # all targets, 5 s per timed workload
    .venv/bin/python bench/run.py --quick              # smoke run
    .venv/bin/python bench/run.py --targets kinesalite,moto --json bench/results/peers.json
    .venv/bin/python bench/run.py --kbench             # cross-check with ../shared/tools/kbench.py

Every target is started by this script on a free port, benchmarked alone (the others are not
running), and stopped, also on Ctrl-C or error. See bench/README.md for what is measured and how.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import client  # noqa: E402
import report  # noqa: E402
import workloads as wl  # noqa: E402
from peers import REPO_DIR, TARGETS, Server, choices, in_work_dir, run_steps  # noqa: E402

KBENCH = (REPO_DIR / ".." / "shared" / "tools" / "kbench.py").resolve()
WORKLOADS = {
    "put1": wl.put1_workload,
    "putN100": lambda ctx: wl.putn_workload(ctx, 100),
    "putN1024": lambda ctx: wl.putn_workload(ctx, 1024),
    "drain": wl.drain_workload,
    "latency": wl.latency_workload,
}
T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--targets", default=",".join(TARGETS), help="comma list out of " + ",".join(TARGETS))
    p.add_argument("--workloads", default=",".join(WORKLOADS), help="comma list out of " + ",".join(WORKLOADS))
    p.add_argument("--seconds", type=float, default=5.0, help="length of each timed put workload")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 1 s workloads, 20k-record drain, 2 s latency (figures are rough)")
    p.add_argument("--json", metavar="PATH", help="also save all figures as JSON")
    p.add_argument("--clients", type=int, default=4, help="client connections for the put workloads")
    p.add_argument("--client-procs", type=int, default=None,
                   help="processes the client connections are spread over (default: one per connection)")
    p.add_argument("--http", choices=("raw", "stdlib"), default="raw",
                   help="client HTTP implementation: http.client, or a minimal socket client (less client CPU)")
    p.add_argument("--preload", type=int, default=200_000, help="records loaded for the GetRecords drain")
    p.add_argument("--preload-seconds", type=float, default=30.0,
                   help="at most this long loading them (slow peers get fewer records)")
    p.add_argument("--warmup", type=float, default=None,
                   help="seconds of untimed load after a server starts (default 2, --quick 0.5)")
    p.add_argument("--latency-rate", type=float, default=200.0, help="producer records/s in the latency test")
    p.add_argument("--latency-seconds", type=float, default=None, help="default: --seconds")
    p.add_argument("--kbench", action="store_true",
                   help=f"instead: run the independent {KBENCH.name} against each target")
    p.add_argument("--kbench-path", default=str(KBENCH))
    p.add_argument("--kbench-args", default="", help="extra kbench arguments, one string")
    a = p.parse_args(argv)
    a.targets = choices(p, a.targets, TARGETS, "target")
    a.workloads = choices(p, a.workloads, WORKLOADS, "workload")
    if a.quick:
        a.seconds, a.preload, a.preload_seconds = 1.0, min(a.preload, 20_000), min(a.preload_seconds, 5.0)
        a.latency_seconds = a.latency_seconds or 2.0
    a.latency_seconds = a.latency_seconds or a.seconds
    a.warmup = (0.5 if a.quick else 2.0) if a.warmup is None else a.warmup
    a.client_procs = a.client_procs or a.clients
    return a


def bench_target(name: str, args: argparse.Namespace, work_dir: Path) -> dict:
    log(f"{name}: starting")
    server = Server(name, work_dir).start()
    log(f"{name}: ready on {server.endpoint} (pid {server.pid})")
    ctx = wl.Ctx(server=server, seconds=args.seconds, clients=args.clients, procs=args.client_procs,
                 preload=args.preload, preload_seconds=args.preload_seconds, latency_rate=args.latency_rate,
                 latency_seconds=args.latency_seconds, log=log)
    steps = []
    if args.warmup > 0:
        steps.append((f"warm-up {args.warmup:g}s", lambda: wl.warmup(ctx, args.warmup) or {}))
    steps += [(w, lambda w=w: WORKLOADS[w](ctx)) for w in args.workloads]
    return run_steps(name, server, steps, log)


def run_benchmark(args: argparse.Namespace, work_dir: Path) -> int:
    figs = {}
    for t in args.targets:
        figs[t] = bench_target(t, args, work_dir)
    figs = {t: report.derive(f) for t, f in figs.items()}
    checks = report.checks(figs, args.targets)
    print()
    print(f"kinesim benchmark: {args.seconds:g} s per timed workload, {args.clients} client connections in "
          f"{args.client_procs} processes ({args.http} HTTP client), 4 shards per stream, "
          f"{platform.node()} ({os.cpu_count()} cores)")
    print()
    print(report.main_table(figs, args.targets))
    print()
    print(report.checks_table(checks))
    print()
    print(report.detail_table(figs, args.targets))
    for t in args.targets:
        for e in figs[t].get("error", []):
            print(f"ERROR {t}: {e}")
    if args.json:
        save_json(args, figs, checks)
    return 0


def save_json(args: argparse.Namespace, figs: dict, checks: list[dict]) -> None:
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    ratios = {f"{a}/{b}": {key: report.ratio(figs[a].get(key), figs[b].get(key))
                           for _, key, _, better in report.ROWS if better}
              for a, b in report.RATIOS if a in figs and b in figs}
    meta = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "args": {k: v for k, v in vars(args).items()}}
    path.write_text(json.dumps({"meta": meta, "results": figs, "ratios": ratios, "checks": checks},
                               indent=1, default=str))
    log(f"saved {path}")


def run_kbench(args: argparse.Namespace, work_dir: Path) -> int:
    """Run kbench against each target this script starts; its own output goes to stdout."""
    worst = 0
    for t in args.targets:
        server = Server(t, work_dir).start()
        try:
            cmd = [sys.executable, args.kbench_path, "--endpoint", server.endpoint, "--server-pid",
                   str(server.pid), "--seconds", f"{args.seconds:g}", "--clients", str(args.clients),
                   "--http", "socket" if args.http == "raw" else "stdlib"]
            if args.quick:
                cmd += ["--get-records", str(args.preload)]
            cmd += shlex.split(args.kbench_args)
            print(f"\n=== kbench against {t} ({server.endpoint}, pid {server.pid})", flush=True)
            print("$ " + shlex.join(cmd), flush=True)
            worst = max(worst, subprocess.run(cmd, stdin=subprocess.DEVNULL).returncode)
        finally:
            server.stop()
    return worst


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    client.HTTP_IMPL = args.http  # before any client process is forked
    run = run_kbench if args.kbench else run_benchmark
    return in_work_dir("kinesim-bench-", lambda work_dir: run(args, work_dir), log)


if __name__ == "__main__":
    sys.exit(main())
