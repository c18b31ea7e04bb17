"""Smoke test of bench/scale.py: every section at tiny sizes against kinesim only (~20-30 s), run
through --kinesim-src with this checkout (the path a "before" figure takes). Only the plumbing is
checked (every figure is there, loads are exact, the mapping adds threads); no timing."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_scale_bench_runs_every_section(tmp_path):
    out = tmp_path / "scale.json"
    run = subprocess.run(
        [sys.executable, str(REPO / "bench" / "scale.py"), "--targets", "kinesim", "--idle-shards", "1,8",
         "--idle-seconds", "0.5", "--settle", "0.2", "--put-shards", "4,8", "--put-seconds", "0.5",
         "--put-min-records", "2000", "--put-warmup", "0", "--clients", "2", "--stored", "1000,2500",
         "--read-rounds", "2", "--kinesim-src", str(REPO), "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["meta"]["kinesim_from"] == str(REPO / "kinesim" / "__init__.py")
    res = doc["results"]
    assert "ERROR" not in run.stdout, run.stdout[-3000:]

    for shards in ("1", "8"):
        idle = res["idle"]["kinesim"][shards]
        assert idle["plain"]["threads"] > 0 and idle["plain"]["rss_mb"] > 0
        assert idle["plain"]["cpu_pct"] >= 0
        assert idle["mapping_setup"]["enabled_s"] > 0
        assert idle["mapping"]["threads_peak"] >= idle["mapping"]["threads"] > 0
    for shards in ("4", "8"):
        puts = res["puts"]["kinesim"][shards]
        assert puts["records"] >= 2000 and puts["rps"] > 0 and not puts["errors"]
        assert puts["shards_written"] == int(shards)  # random keys reach every shard
        assert puts["bytes_per_record"] > 0  # a durable server writes something
    stored = res["stored"]["kinesim"]
    assert [stored[s]["loaded"] for s in ("1000", "2500")] == [1000, 2500]  # loads are exact
    for s in ("1000", "2500"):
        assert stored[s]["read_ms"] > 0 and stored[s]["restart_s"] > 0 and stored[s]["first_read_ms"] > 0
        assert stored[s]["page_records"] > 0 and stored[s]["disk_bytes_per_record"] > 0
    assert [c["result"] for c in doc["checks"]] == ["n/a"] * 4  # 2,048 and 1,024 shards were not run
    for heading in ("idle, no mapping", "idle with one event source mapping", "PutRecords, 500 x 100 B",
                    "stored records"):
        assert heading in run.stdout
