"""Smoke test of bench/functions.py: a short run against kinesim only (~8-13 s) must deliver every
record to the function exactly once and produce every figure. The figures themselves are not
checked: this is the benchmark's plumbing, not a performance test."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_functions_bench_runs_and_delivers_everything(tmp_path):
    out = tmp_path / "functions.json"
    run = subprocess.run(
        [sys.executable, str(REPO / "bench" / "functions.py"), "--targets", "kinesim", "--seconds", "0.5",
         "--preload", "2000", "--api-rounds", "2", "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=90)
    assert run.returncode == 0, run.stderr[-2000:]
    fig = json.loads(out.read_text())["results"]["kinesim"]
    assert "error" not in fig, fig["error"]
    for batch in (100, 1):
        assert fig[f"lat{batch}.sent"] > 0
        assert fig[f"lat{batch}.seen"] == fig[f"lat{batch}.sent"]
        assert fig[f"lat{batch}.dups"] == 0
        assert 0 < fig[f"lat{batch}.p50"] <= fig[f"lat{batch}.p99"]
    assert fig["rate.preloaded"] == 2000 and fig["rate.delivered"] == 2000
    assert (fig["rate.check.missing"], fig["rate.check.extra"], fig["rate.check.disorder"]) == (0, 0, 0)
    assert fig["rate.rps"] > 0 and fig["rate.invocations"] >= 20  # 4 shards, BatchSize 100
    for op in ("create_function", "create_mapping", "get_mapping", "delete_mapping", "delete_function", "invoke"):
        assert fig[f"api.{op}.p50"] > 0
    assert "put->handler p50 ms, BatchSize 100" in run.stdout
