"""A second real client in another language: the AWS SDK for JavaScript v3 (KinesisClient with
its default request handler, NodeHttp2Handler, so cleartext HTTP/2 with prior knowledge) runs
tests/node/kinesis_h2.mjs against a kinesim server: streams, records, resharding, enhanced
fan-out (SubscribeToShard event stream) and deletion. Skipped only where node/npm are absent."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import start_server
from npm_setup import NODE, NPM, NPM_TIMEOUT_S, ensure_node_modules

NODE_DIR = Path(__file__).parent / "node"
SCRIPT = NODE_DIR / "kinesis_h2.mjs"
SCRIPT_TIMEOUT_S = 180


pytestmark = [
    pytest.mark.skipif(
        not (NODE and NPM),
        reason=f"node and npm are needed for the AWS SDK for JavaScript test (node={NODE}, npm={NPM})"),
    # a first run installs the SDK (setup counts towards pytest-timeout's 300 s default)
    pytest.mark.timeout(NPM_TIMEOUT_S + SCRIPT_TIMEOUT_S + 60),
]


@pytest.fixture(scope="module")
def node_server(tmp_path_factory):
    ensure_node_modules(NODE_DIR)
    proc = start_server(tmp_path_factory)
    yield proc
    proc.stop()


def test_aws_sdk_js_v3_over_h2c(node_server):
    cmd = [NODE, str(SCRIPT), node_server.url]
    env = {**os.environ, "KINESIM_NODE_TIMEOUT_MS": str((SCRIPT_TIMEOUT_S - 10) * 1000)}
    t0 = time.monotonic()
    try:
        res = subprocess.run(cmd, cwd=NODE_DIR, capture_output=True, text=True, timeout=SCRIPT_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"node timed out after {SCRIPT_TIMEOUT_S}s\nstdout:\n{e.stdout}\nstderr:\n{e.stderr}")
    elapsed = time.monotonic() - t0
    output = f"node exit code {res.returncode} after {elapsed:.1f}s\nstdout:\n{res.stdout}\nstderr:\n{res.stderr}"
    assert res.returncode == 0, output

    lines = [line for line in res.stdout.splitlines() if line.startswith("{")]
    assert lines, "no JSON summary line\n" + output
    summary = json.loads(lines[-1])
    assert summary["ok"] is True, output
    assert summary["handler"] == "NodeHttp2Handler", output
    assert summary["handlerProtocol"] == "h2", output
    assert summary["wire"]["http1Requests"] == 0, output
    assert summary["wire"]["h2Streams"] > 0 and summary["wire"]["h2SessionErrors"] == [], output
    assert summary["multiplexed"]["sessions"] == 1 and summary["multiplexed"]["streams"] == 20, output
    assert summary["recordsPut"] == 71 and summary["recordsReadBack"] == 71, output
    assert summary["subscribeLatest"]["records"] == 10, output
    assert summary["subscribeTrimHorizon"]["records"] == 1, output
    print(f"\nnode SDK run: {elapsed:.1f}s; {lines[-1]}")
