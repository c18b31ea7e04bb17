"""Every code block of README.md and of the docs/ pages, run as a new user runs it: alone, pasted into
a new shell (in the repository's root, where the pages say their commands run) or saved as a file of
its own and run by the venv's Python, twice in a row, against a server started as `make serve`
starts it (the default settings, the state delays included), in a directory and environment with
nothing of the test's own: no AWS_* variables, no ~/.aws, the venv not activated. So a block that
uses a name an earlier block defined, needs credentials or a region it does not give, or fails on
its second run (a create of what exists) fails the suite.

All blocks share one server (one per module keeps the suite fast), run in reverse order (the docs/
pages from the last, then README's) so that no block finds what an earlier one made. What the test
changes in a block, and nothing else: `localhost:4566` becomes the test server's port, `.venv/bin/`
the running venv's bin directory (`.venv/bin/` of this checkout under `make test`), and
localstack-client, which always targets localhost:4566, gets the port through its own setting
(LOCALSTACK_HOST). A shell line that runs until Ctrl-C (its comment says so) gets Ctrl-C once it has
printed something, or after 3 s: it passes if it was still running and then ended as Ctrl-C ends it.
Shell blocks run under `bash -e -o pipefail`: every command must succeed, as a user reading the
output would expect.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ctrl_c_reaches_child, start_server
from kinesim.config import Settings
from kinesim.server import free_port
from readme_blocks import ROOT, Block, blocks

# Blocks not run here, each with why and where what it shows is tested instead.
SKIPPED = {
    "The two commands #1":
        "`make serve` and `make test` start the server and run this suite themselves",
    "From `make serve` to a Spark SQL answer #1":
        "needs Spark (`kinesim sql`, 20 s to over a minute to start); tests/test_pipeline.py (slow) runs "
        "these commands: deploy, put --generate clickstream, kinesim sql",
    "Deploy with the tools you have #2":
        "needs the SAM CLI, which the user installs (pip install aws-sam-cli); tests/test_tool_sam.py runs "
        "sam build, sam deploy --resolve-s3 and sam delete on an app of its own",
    "Deploy with the tools you have #3":
        "needs the CDK from npm and an aws CLI on the PATH; tests/test_tool_cdk_example.py and "
        "test_tool_cdk_example_python.py deploy, use, update and destroy examples/cdk-uploads as here",
    "Spark #1":
        "needs Spark; test_readme_walk.py::test_structured_streaming_example_prints_the_records_and_ends_cleanly "
        "(slow) runs this block as written",
    "A first test #1":
        "makes the orders-app/ project in the checkout and runs pytest in it three times; "
        "tests/test_pytest_plugin.py makes such a project (its own pyproject.toml, tests using only the fixture "
        "and boto3) in a temporary directory and runs it twice in a row and with -n 2",
    "Options #1":
        "a pyproject.toml excerpt, not a command; tests/test_docs.py::test_the_kinesim_args_excerpt_reaches_the_server "
        "puts it in a project's pyproject.toml and checks the server is started with those arguments",
    "Continuous queries #1":
        "needs Spark; tests/test_pipeline.py (slow) runs kinesim sql --continuous into page-views-per-minute, "
        "kinesim queries show and delete, and tests/test_continuous_queries.py list, stop and resume",
}
RUN = [b for b in reversed(blocks()) if b.name not in SKIPPED]

# A user pressing Ctrl-C: once the command has printed output (errors go to stderr and do not
# count), or after 3 s of silence for a command that waits for new records.
UNTIL_CTRL_C = r"""
until_ctrl_c() {
    local out err pid status=0 waited=0
    out=$(mktemp); err=$(mktemp)
    set -m  # job control, as in a terminal: the background command is not deaf to Ctrl-C
    "$@" >"$out" 2>"$err" &
    pid=$!
    set +m
    while kill -0 "$pid" 2>/dev/null && [ ! -s "$out" ] && [ "$waited" -lt 30 ]; do
        sleep 0.1; waited=$((waited + 1))
    done
    if kill -INT "$pid" 2>/dev/null; then
        wait "$pid" || status=$?
        if [ "$status" -eq 130 ]; then status=0; fi
    else
        wait "$pid" || status=$?
        echo "until_ctrl_c: '$*' ended by itself (status $status) before Ctrl-C" >&2
        if [ "$status" -eq 0 ]; then status=1; fi
    fi
    cat "$out"; cat "$err" >&2; rm -f "$out" "$err"
    return "$status"
}
"""


def test_every_block_is_run_or_skipped_for_a_reason():
    names = [b.name for b in blocks()]
    assert sorted(set(SKIPPED) - set(names)) == []  # a renamed section: update SKIPPED
    assert {b.language for b in RUN} <= {"sh", "python"}  # another language needs a runner here
    assert len(RUN) + len(SKIPPED) == len(names)


@pytest.fixture(scope="module")
def readme_server(tmp_path_factory):
    defaults = Settings()
    # Kafka served too, on a port of its own (docs/kafka.md's blocks use localhost:9092)
    proc = start_server(tmp_path_factory, create_stream_ms=defaults.create_stream_ms,
                        delete_stream_ms=defaults.delete_stream_ms, update_stream_ms=defaults.update_stream_ms,
                        kafka_port=free_port())
    yield proc
    proc.stop()


def _fresh_env(port: int, home: Path) -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "LOCALSTACK_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env.update(HOME=str(home), LOCALSTACK_HOST=f"localhost:{port}",
               # Without credentials boto3 would ask the EC2 metadata service, for seconds, before failing.
               AWS_EC2_METADATA_DISABLED="true")
    return env


def _as_run_here(block: Block, port: int, kafka_port: int) -> str:
    code = block.code.replace("localhost:4566", f"localhost:{port}").replace("localhost:9092",
                                                                              f"localhost:{kafka_port}")
    code = code.replace(".venv/bin/", f"{Path(sys.executable).parent}/")
    if block.language == "sh":
        code = UNTIL_CTRL_C + "\n".join(
            re.sub(r"^(\s*)", r"\1until_ctrl_c ", line, count=1) if re.search(r"#.*Ctrl-C", line) else line
            for line in code.splitlines()) + "\n"
    return code


@pytest.mark.parametrize("block", RUN, ids=[b.name for b in RUN])
def test_block_runs_alone_and_again(block, readme_server, tmp_path):
    port = int(readme_server.url.rsplit(":", 1)[1])
    home = tmp_path / "home"
    home.mkdir()
    if block.language == "sh":
        script = tmp_path / "block.sh"
        command, cwd = ["bash", "-e", "-o", "pipefail", str(script)], ROOT
    else:
        script = tmp_path / "snippet.py"
        command, cwd = [sys.executable, str(script)], tmp_path
    script.write_text(_as_run_here(block, port, readme_server.settings.kafka_port))
    for attempt in ("first", "second"):
        # A user's shell passes Ctrl-C on, even when this suite runs as a background job (which
        # starts it with SIGINT ignored, and bash cannot undo an ignored signal it was started with).
        proc = subprocess.run(command, cwd=cwd, env=_fresh_env(port, home), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=300, preexec_fn=ctrl_c_reaches_child)
        report = (f"{block.where} ({block.name}), {attempt} run:\n"
                  f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}")
        assert proc.returncode == 0, report
        assert "Traceback" not in proc.stderr, report
