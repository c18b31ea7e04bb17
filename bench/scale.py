#!/usr/bin/env python3
"""How kinesim scales with shards and with stored records, next to kinesalite (issue 33).

    .venv/bin/python bench/scale.py                          # every section, default sizes (~15 min)
    .venv/bin/python bench/scale.py --quick                  # smoke run (~2 min); figures are rough
    .venv/bin/python bench/scale.py --sections idle --idle-shards 1,2048 --targets kinesim
    .venv/bin/python bench/scale.py --kinesim-src /tmp/before --json bench/results/scale-before.json

Sections (--sections, comma list):

  idle    for each shard count, a fresh server and one stream of that many shards, left idle:
          threads, CPU (% of one core) and RSS of the server's whole process tree over the window;
          then (kinesim) a python3.12 function with a no-op handler and an event source mapping
          at LATEST on the stream, waited Enabled, and the same window again with no record
          flowing: what the mapping adds. kinesalite has no Lambda: its first window only.
  puts    for each shard count, a fresh server and stream, PutRecords of 500 x 100 B records with
          random partition keys and payloads from --clients connections (one process each) for
          --put-seconds, longer if fewer than --put-min-records were acknowledged: records/s and
          bytes the server's tree wrote to storage per record (/proc/<pid>/io write_bytes over the
          window, WAL checkpoints included when they fall in it; kinesalite keeps everything in
          memory, so ~0).
  stored  one 4-shard stream loaded in steps to each --stored size; at each size the first page
          (Limit 10000) of GetRecords at TRIM_HORIZON (median of --read-rounds, over the shards in
          turn, fresh iterator each), and for kinesim a restart: stop, start again on the same data
          directory, time until DescribeStreamSummary answers ACTIVE, then the first read again.
          kinesalite (in memory) cannot restart: read latency only.

Every server is started on a free port with a shard limit of 100,000 (kinesim's default is 500,
kinesalite's 10), alone, and stopped in a `finally` (process group, bench/peers.py), also on
Ctrl-C. --kinesim-src DIR runs kinesim from another checkout with this venv (PYTHONPATH=DIR in
front; the server's log line `kinesim imported from ...` is checked), for a "before" figure.
A benchmark, not a test: it exits 0 whatever the figures are. See bench/README.md, "Scale".
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import client  # noqa: E402
import scale_probe as sp  # noqa: E402
from peers import choices, in_work_dir  # noqa: E402
from report import fmt_value, ratio, text_table  # noqa: E402

SECTIONS = ("idle", "puts", "stored")
TARGETS = ("kinesim", "kinesalite")
DEFAULTS = {"idle_shards": "1,16,256,1024,2048", "put_shards": "1,4,16,256,1024",
            "stored": "100000,300000,1000000,3000000", "idle_seconds": 10.0, "settle": 3.0,
            "put_seconds": 10.0, "put_min_records": 100_000, "put_warmup": 2.0, "read_rounds": 7}
QUICK = {"idle_shards": "1,256,2048", "put_shards": "4,256,1024", "stored": "100000,300000",
         "idle_seconds": 3.0, "settle": 2.0, "put_seconds": 3.0, "put_min_records": 0, "put_warmup": 1.0,
         "read_rounds": 3}
# The targets
MAPPING_SHARDS, MAX_MAPPING_THREADS, MAX_IDLE_CPU_PCT = 2048, 64, 1.0  # issue: "a 2,000-shard stream"
PUT_SHARDS, PUT_BASE_SHARDS, MAX_BYTES_PER_RECORD, MIN_RPS_SHARE = 1024, 4, 1500, 0.60
T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sections", default=",".join(SECTIONS), help="comma list out of " + ",".join(SECTIONS))
    p.add_argument("--targets", default=",".join(TARGETS), help="comma list out of " + ",".join(TARGETS))
    p.add_argument("--quick", action="store_true",
                   help="smoke sizes: " + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in QUICK.items())
                   + " (an option given explicitly wins)")
    p.add_argument("--idle-shards", metavar="N,N,..",
                   help=f"shard counts of the idle section ({DEFAULTS['idle_shards']})")
    p.add_argument("--idle-seconds", type=float, metavar="S", help="length of each idle window (10)")
    p.add_argument("--settle", type=float, metavar="S",
                   help="wait after creating the stream and after the mapping is Enabled (before an idle window), "
                        "and after each load (before the stored section's reads) (3)")
    p.add_argument("--put-shards", metavar="N,N,..",
                   help=f"shard counts of the puts section ({DEFAULTS['put_shards']})")
    p.add_argument("--put-seconds", type=float, metavar="S", help="length of each timed PutRecords run (10)")
    p.add_argument("--put-min-records", type=int, metavar="N",
                   help="go on past --put-seconds until this many records are acknowledged (100000; "
                        "at most max(3 x --put-seconds, 30 s) longer)")
    p.add_argument("--put-warmup", type=float, metavar="S",
                   help="untimed PutRecords load before each timed run (2): node's JIT makes kinesalite's "
                        "first second several times slower")
    p.add_argument("--clients", type=int, default=4,
                   help="client connections (one process each) for the puts and loads (4)")
    p.add_argument("--stored", metavar="N,N,..",
                   help=f"stored-record sizes, loaded in steps ({DEFAULTS['stored']})")
    p.add_argument("--read-rounds", type=int, metavar="N", help="GetRecords timed per size, median taken (7)")
    p.add_argument("--load-timeout", type=float, default=900.0, metavar="S",
                   help="most seconds one loading step may take; a target that falls short stops there (900)")
    p.add_argument("--kinesim-src", metavar="DIR",
                   help="run kinesim from this checkout (PYTHONPATH=DIR in front of this venv's install)")
    p.add_argument("--json", metavar="PATH", help="also save every figure and check as JSON")
    a = p.parse_args(argv)
    a.sections = choices(p, a.sections, SECTIONS, "section")
    a.targets = sorted(choices(p, a.targets, TARGETS, "target"), key=TARGETS.index)  # kinesim's column first
    for key, default in DEFAULTS.items():
        if getattr(a, key) is None:
            setattr(a, key, (QUICK if a.quick else DEFAULTS)[key])
    try:
        for key in ("idle_shards", "put_shards", "stored"):
            setattr(a, key, sorted({int(x.replace("_", "")) for x in getattr(a, key).split(",") if x.strip()}))
    except ValueError as e:
        p.error(f"not a number list: {e}")
    if a.kinesim_src:
        a.kinesim_src = str(Path(a.kinesim_src).resolve())
        if not (Path(a.kinesim_src) / "kinesim" / "__init__.py").exists():
            p.error(f"--kinesim-src {a.kinesim_src}: no kinesim/__init__.py there")
    return a


def new_server(name: str, work_dir: Path, args: argparse.Namespace) -> sp.ScaleServer:
    server = sp.ScaleServer(name, work_dir)
    server.src = args.kinesim_src
    server.start()
    where = server.imported_from()
    if args.kinesim_src and name == "kinesim" and not (where or "").startswith(args.kinesim_src + os.sep):
        server.stop()
        raise RuntimeError(f"--kinesim-src {args.kinesim_src}, but the server imported kinesim from {where}")
    args.imported_from = getattr(args, "imported_from", None) or where
    return server


def step(results: dict, key: str, body) -> None:
    """One measurement into results[key]; an error is logged and recorded, the next one runs."""
    try:
        results[key] = body()
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as e:  # noqa: BLE001 - recorded with the figures; the benchmark goes on
        log(f"  {key} FAILED: {type(e).__name__}: {e}")
        results[key] = {"error": f"{type(e).__name__}: {e}"}


def timed_stop(server: sp.ScaleServer) -> float:
    t0 = time.monotonic()
    server.stop(timeout=60)
    return time.monotonic() - t0


# ---------------------------------------------------------------------------------------------
# the sections

def idle_one(target: str, shards: int, args: argparse.Namespace, work_dir: Path) -> dict:
    server = new_server(target, work_dir, args)
    try:
        stream, create_s = sp.create_stream(server.endpoint, shards, "idle")
        time.sleep(args.settle)
        out = {"create_s": create_s, "plain": sp.idle_window(server, args.idle_seconds)}
        log(f"  {target} {shards} shards: {out['plain']['threads']} threads, {out['plain']['cpu_pct']:.2f}% CPU, "
            f"{out['plain']['rss_mb']:.0f} MB")
        if target == "kinesim":
            out["mapping_setup"] = sp.add_mapping(server.endpoint, stream)
            time.sleep(args.settle)
            m = out["mapping"] = sp.idle_window(server, args.idle_seconds)
            m["extra_threads"] = m["threads_peak"] - out["plain"]["threads"]
            m["extra_cpu_pct"] = m["cpu_pct"] - out["plain"]["cpu_pct"]
            log(f"  {target} {shards} shards + mapping: {m['threads']} threads (peak {m['threads_peak']}), "
                f"{m['cpu_pct']:.2f}% CPU, {m['rss_mb']:.0f} MB")
        out["stop_s"] = timed_stop(server)
        return out
    finally:
        server.stop()
        shutil.rmtree(work_dir, ignore_errors=True)


def puts_one(target: str, shards: int, args: argparse.Namespace, work_dir: Path) -> dict:
    server = new_server(target, work_dir, args)
    try:
        stream, _ = sp.create_stream(server.endpoint, shards, "puts")
        if args.put_warmup > 0:  # node's JIT, kinesim's first-use set-up: not part of the figure
            sp.put_load(server, stream, args.clients, args.put_warmup, log=log)
        out = sp.put_load(server, stream, args.clients, args.put_seconds, args.put_min_records, log=log)
        log(f"  {target} {shards} shards: {out['rps']:,.0f} records/s, "
            f"{fmt_value(out['bytes_per_record'], '{:,.0f}')} B written per record over {out['seconds']:.1f}s, "
            f"{out['shards_written']} shards written")
        return out
    finally:
        server.stop()
        shutil.rmtree(work_dir, ignore_errors=True)


def stored_target(target: str, args: argparse.Namespace, work_dir: Path) -> dict:
    results: dict = {}
    server = new_server(target, work_dir, args)
    try:
        stream, _ = sp.create_stream(server.endpoint, 4, "stored")
        shards = sp.shard_ids(server.endpoint, stream)
        loaded = 0
        for size in args.stored:
            load = sp.put_load(server, stream, args.clients, args.load_timeout, quota=size - loaded, log=log)
            loaded += load["records"]
            fig = results[str(size)] = {"loaded": loaded, "load_rps": load["rps"], "load_errors": load["errors"],
                                        "rss_mb": load["rss_mb"]}
            if loaded < size:
                fig["error"] = f"loaded only {loaded:,} of {size:,} in {args.load_timeout:g}s"
                log(f"  {target}: {fig['error']}; no larger sizes")
                break
            time.sleep(args.settle)  # the load's last WAL checkpoint and writeback are not the read's
            lat = sp.read_latency(server.endpoint, stream, shards, args.read_rounds)
            fig.update(read_ms=statistics.median(lat["ms"]), read_min_ms=lat["ms"][0], read_max_ms=lat["ms"][-1],
                       page_records=min(lat["records"]))
            if target == "kinesim":
                fig["disk_bytes_per_record"] = server.data_bytes() / loaded
                fig["stop_s"] = timed_stop(server)
                server = sp.ScaleServer(target, work_dir)  # the same directory: the same data
                server.src, server.ready_stream = args.kinesim_src, stream
                server.start(timeout=600)
                fig["restart_s"] = server.ready_s
                fig["first_read_ms"] = sp.read_latency(server.endpoint, stream, shards, 1)["ms"][0]
            log(f"  {target} {loaded:,} records ({load['rps']:,.0f}/s loading): GetRecords "
                f"{fig['read_ms']:.1f} ms" + (f", restart {fig['restart_s']:.2f}s, first read after it "
                                              f"{fig['first_read_ms']:.1f} ms" if "restart_s" in fig else ""))
        return results
    finally:
        server.stop()
        shutil.rmtree(work_dir, ignore_errors=True)


def run_sections(args: argparse.Namespace, work_dir: Path) -> dict:
    res: dict = {s: {t: {} for t in args.targets} for s in args.sections}
    if "idle" in args.sections:
        for n in args.idle_shards:
            for t in args.targets:
                log(f"idle: {t}, {n} shards")
                step(res["idle"][t], str(n), lambda: idle_one(t, n, args, work_dir / f"idle-{t}-{n}"))
    if "puts" in args.sections:
        for n in args.put_shards:
            for t in args.targets:
                log(f"puts: {t}, {n} shards")
                step(res["puts"][t], str(n), lambda: puts_one(t, n, args, work_dir / f"puts-{t}-{n}"))
    if "stored" in args.sections:
        for t in args.targets:
            log(f"stored: {t}, up to {args.stored[-1]:,} records")
            step(res["stored"], t, lambda: stored_target(t, args, work_dir / f"stored-{t}"))
    return res


# ---------------------------------------------------------------------------------------------
# the report

def _get(d: dict, *keys):
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def idle_tables(res: dict, args: argparse.Namespace) -> list[str]:
    out = []
    header, rows = ["shards"], []
    for t in args.targets:
        header += [f"{t} threads", f"{t} CPU %", f"{t} RSS MB"]
    for n in args.idle_shards:
        row = [f"{n:,}"]
        for t in args.targets:
            p = _get(res, t, str(n), "plain") or {}
            row += [fmt_value(p.get("threads"), "{}"), fmt_value(p.get("cpu_pct"), "{:.2f}"),
                    fmt_value(p.get("rss_mb"), "{:.0f}")]
        rows.append(row)
    out.append(f"idle, no mapping ({args.idle_seconds:g} s window, {args.settle:g} s after the stream is ACTIVE)\n"
               + text_table(header, rows))
    if "kinesim" in args.targets:
        rows = []
        for n in args.idle_shards:
            f = _get(res, "kinesim", str(n)) or {}
            m, setup = f.get("mapping") or {}, f.get("mapping_setup") or {}
            rows.append([f"{n:,}", fmt_value(m.get("threads"), "{}"), fmt_value(m.get("threads_peak"), "{}"),
                         fmt_value(m.get("extra_threads"), "{:+}"), fmt_value(m.get("cpu_pct"), "{:.2f}"),
                         fmt_value(m.get("extra_cpu_pct"), "{:+.2f}"), fmt_value(m.get("rss_mb"), "{:.0f}"),
                         fmt_value(m.get("processes"), "{}"), fmt_value(setup.get("enabled_s"), "{:.2f}"),
                         fmt_value(f.get("stop_s"), "{:.2f}")])
        out.append("kinesim idle with one event source mapping (LATEST, no records)\n" + text_table(
            ["shards", "threads", "peak", "mapping's threads", "CPU %", "mapping's CPU %", "RSS MB", "processes",
             "to Enabled s", "stop s"], rows))
    return out


def puts_table(res: dict, args: argparse.Namespace) -> str:
    header = ["shards"]
    for t in args.targets:
        header += [f"{t} records/s", f"{t} B written/rec", f"{t} server cores"]
    pair = "kinesim" in args.targets and "kinesalite" in args.targets
    header += ["kinesim/kinesalite"] if pair else []
    header += ["kinesim vs 4 shards"] if "kinesim" in args.targets else []
    rows = []
    base = _get(res, "kinesim", str(PUT_BASE_SHARDS), "rps")
    for n in args.put_shards:
        row = [f"{n:,}"]
        for t in args.targets:
            f = _get(res, t, str(n)) or {}
            row += [fmt_value(f.get("rps"), "{:,.0f}"), fmt_value(f.get("bytes_per_record"), "{:,.0f}"),
                    fmt_value(f.get("server_cores"), "{:.2f}")]
        r = ratio(_get(res, "kinesim", str(n), "rps"), _get(res, "kinesalite", str(n), "rps"))
        row += [fmt_value(r, "{:.2f}x")] if pair else []
        if "kinesim" in args.targets:
            row.append(fmt_value(ratio(_get(res, "kinesim", str(n), "rps"), base), "{:.2f}"))
        rows.append(row)
    return (f"PutRecords, 500 x 100 B, random keys, {args.clients} connections, >= {args.put_seconds:g} s "
            f"(and >= {args.put_min_records:,} records) per shard count\n" + text_table(header, rows))


def stored_table(res: dict, args: argparse.Namespace) -> str:
    header, rows = ["records"], []
    k, kl = "kinesim" in args.targets, "kinesalite" in args.targets
    if k:
        header += ["kinesim GetRecords ms", "min-max", "restart s", "1st read after ms", "disk B/rec",
                   "RSS MB", "loading rec/s"]
    if kl:
        header += ["kinesalite GetRecords ms", "RSS MB", "loading rec/s"]
    if k and kl:
        header.append("kinesim/kinesalite ms")
    for size in args.stored:
        a, b = _get(res, "kinesim", str(size)) or {}, _get(res, "kinesalite", str(size)) or {}
        row = [f"{size:,}"]
        if k:
            row += [fmt_value(a.get("read_ms"), "{:.1f}"),
                    f"{fmt_value(a.get('read_min_ms'), '{:.1f}')}-{fmt_value(a.get('read_max_ms'), '{:.1f}')}",
                    fmt_value(a.get("restart_s"), "{:.2f}"), fmt_value(a.get("first_read_ms"), "{:.1f}"),
                    fmt_value(a.get("disk_bytes_per_record"), "{:,.0f}"), fmt_value(a.get("rss_mb"), "{:.0f}"),
                    fmt_value(a.get("load_rps"), "{:,.0f}")]
        if kl:
            row += [fmt_value(b.get("read_ms"), "{:.1f}"), fmt_value(b.get("rss_mb"), "{:.0f}"),
                    fmt_value(b.get("load_rps"), "{:,.0f}")]
        if k and kl:
            row.append(fmt_value(ratio(a.get("read_ms"), b.get("read_ms")), "{:.2f}x"))
        rows.append(row)
    return ("stored records, one 4-shard stream: first GetRecords page at TRIM_HORIZON (Limit 10000), median of "
            f"{args.read_rounds}; restart = launch to DescribeStreamSummary ACTIVE (kinesalite: in memory, no "
            "restart)\n" + text_table(header, rows))


def checks(res: dict) -> list[dict]:
    out = []

    def add(label, value, ok):
        out.append({"check": label, "value": value, "result": "n/a" if ok is None else "PASS" if ok else "MISS"})

    m = _get(res, "idle", "kinesim", str(MAPPING_SHARDS), "mapping") or {}
    v = m.get("extra_threads")
    add(f"mapping on {MAPPING_SHARDS:,} shards: < {MAX_MAPPING_THREADS} threads (peak, with - without)",
        fmt_value(v, "{}"), None if v is None else v < MAX_MAPPING_THREADS)
    v = m.get("cpu_pct")
    add(f"{MAPPING_SHARDS:,} shards with a mapping, idle: < {MAX_IDLE_CPU_PCT:g}% of a core (whole server)",
        fmt_value(v, "{:.2f}%"), None if v is None else v < MAX_IDLE_CPU_PCT)
    p = _get(res, "puts", "kinesim", str(PUT_SHARDS)) or {}
    v = p.get("bytes_per_record")
    add(f"PutRecords at {PUT_SHARDS:,} shards: <= {MAX_BYTES_PER_RECORD:,} B written per 100 B record",
        fmt_value(v, "{:,.0f} B"), None if v is None else v <= MAX_BYTES_PER_RECORD)
    v = ratio(p.get("rps"), _get(res, "puts", "kinesim", str(PUT_BASE_SHARDS), "rps"))
    add(f"PutRecords records/s at {PUT_SHARDS:,} shards >= {MIN_RPS_SHARE:.0%} of that at {PUT_BASE_SHARDS} shards",
        fmt_value(v, "{:.0%}"), None if v is None else v >= MIN_RPS_SHARE)
    return out


def thread_details(res: dict, args: argparse.Namespace) -> list[str]:
    """Where the threads are: per thread name (/proc/.../task/*/comm) at the largest idle count."""
    lines = []
    for t in args.targets:
        f = _get(res, "idle", t, str(args.idle_shards[-1])) if args.idle_shards else None
        for phase in ("plain", "mapping"):
            names = _get(f or {}, phase, "thread_names")
            if names:
                text = ", ".join(f"{k} {v}" for k, v in sorted(names.items(), key=lambda kv: -kv[1]))
                lines.append(f"threads by name, {t} {args.idle_shards[-1]:,} shards"
                             f"{' + mapping' if phase == 'mapping' else ''}: {text}")
    return lines


def errors(res: dict) -> list[str]:
    found = []

    def walk(d, path):
        if isinstance(d, dict):
            for k, v in d.items():
                if k == "error":
                    found.append(f"ERROR {' '.join(path)}: {v}")
                elif k in ("errors", "load_errors") and v:
                    found.append(f"failed records {' '.join(path)}: {v}")
                else:
                    walk(v, path + [k])
    walk(res, [])
    return found


def run_benchmark(args: argparse.Namespace, work_dir: Path) -> int:
    if args.kinesim_src and "kinesim" in args.targets:
        log(f"--kinesim-src: the venv's Python imports {sp.check_src(args.kinesim_src)}")
    started = time.time()
    res = run_sections(args, work_dir)
    check_rows = checks(res)
    print()
    print(f"kinesim scale benchmark, {platform.node()} ({os.cpu_count()} cores, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end); kinesim from "
          f"{getattr(args, 'imported_from', None) or '-'}")
    if "idle" in res:
        for table in idle_tables(res["idle"], args):
            print("\n" + table)
    if "puts" in res:
        print("\n" + puts_table(res["puts"], args))
    if "stored" in res:
        print("\n" + stored_table(res["stored"], args))
    print("\n" + text_table(["target", "value", "result"], [[r["check"], r["value"], r["result"]] for r in check_rows]))
    for line in thread_details(res.get("idle", {}), args) + errors(res):
        print(line)
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)), "host": platform.node(),
                "cpus": os.cpu_count(), "python": platform.python_version(), "kinesim_from": getattr(
                    args, "imported_from", None), "wall_s": time.time() - started,
                "args": {k: v for k, v in vars(args).items() if k != "imported_from"}}
        path.write_text(json.dumps({"meta": meta, "results": res, "checks": check_rows}, indent=1, default=str))
        log(f"saved {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    client.HTTP_IMPL = "raw"  # the lean client (bench/client.py): before any load process is forked
    return in_work_dir("kinesim-scale-", lambda work_dir: run_benchmark(args, work_dir), log)


if __name__ == "__main__":
    sys.exit(main())
