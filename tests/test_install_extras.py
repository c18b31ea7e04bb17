"""What each install holds (issue 32): `pip install kinesim` is the server and every command but
Spark's; the `spark` extra adds `kinesim sql` and continuous queries; the `test` extra the tests' tools.

- Every third-party import of kinesim's code is satisfied by the install that runs it: the core
  dependencies (with theirs) for everything, the `spark` extra only under kinesim.analytics, the
  `test` extra only in a pytest plugin module (read with `ast` and pyproject.toml, the packages'
  own requirements from the installed metadata).
- Spark is imported at module level only by the modules Spark itself runs (its Python data sources).
- With Spark's packages (and the tests' tools) made unimportable, as in an install without the
  extras: `kinesim sql`, `kinesim serve --spark` and `connect()` say in one line how to add Spark,
  and a server serves streams, delivery, objects and the console all the same.
"""
from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import textwrap
import tomllib
import urllib.request
import uuid
from pathlib import Path

from packaging.requirements import Requirement

from conftest import client_for, wait_for
from kinesim.analytics import continuous, spark_extra
from kinesim.analytics.connect_server import state_dir
from kinesim.analytics.tables import server_info
from kinesim.server import free_port, wait_ready

ROOT = Path(__file__).resolve().parent.parent
FIRST_PARTY = {"kinesim", "firehose", "lambdas"}
# The modules Spark runs (its Python data sources and their writers, in Spark's Python workers or a
# session's process): the only ones that import pyspark at module level.
SPARK_ONLY = {"kinesim.analytics.streaming", "kinesim.analytics.sink"}
# What an install without the extras lacks, by import name.
SPARK_IMPORTS = ("pyspark", "py4j", "pandas", "grpc", "grpc_status", "zstandard")
TEST_IMPORTS = ("pytest", "_pytest", "xdist", "pytest_timeout", "moto", "localstack_client", "awscli", "requests",
                "playwright")


# ---------------------------------------------------------------------------- the packages' imports

def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def _applies(req: Requirement, extras) -> bool:
    return req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ("", *extras))


def _closure(requirements: list[str]) -> set[str]:
    """The distributions these requirements install, theirs included (as installed here)."""
    found: set[str] = set()
    seen: set[tuple[str, frozenset]] = set()
    todo = [r for r in map(Requirement, requirements) if _applies(r, ())]
    while todo:
        req = todo.pop()
        name = _name(req.name)
        if (name, frozenset(req.extras)) in seen:
            continue
        seen.add((name, frozenset(req.extras)))
        found.add(name)
        try:
            dist = importlib.metadata.distribution(req.name)
        except importlib.metadata.PackageNotFoundError:
            continue  # not installed here: an import of it is reported below
        todo.extend(sub for sub in map(Requirement, dist.requires or []) if _applies(sub, req.extras))
    return found


def _modules():
    for package in sorted(FIRST_PARTY):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def _imports(module: str, path: Path):
    """(imported name, whether the import runs at module level) of each import in the module,
    relative ones made absolute (`from .x import y` gives x and x.y); `if TYPE_CHECKING:` left out."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    stack: list[tuple[ast.AST, bool]] = [(ast.parse(path.read_text(), str(path)), True)]
    while stack:
        node, top = stack.pop()
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, top
            continue
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
            yield base, top
            for alias in node.names:
                yield f"{base}.{alias.name}", top
            continue
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            stack.extend((child, top) for child in node.orelse)
            continue
        inner = top and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))


def _plugin_modules() -> set[str]:
    """Modules pytest loads through kinesim's `pytest11` entry points: the only ones that may import pytest."""
    points = _project().get("entry-points", {}).get("pytest11", {})
    return {value.partition(":")[0].strip() for value in points.values()}


def test_every_import_is_in_the_install_that_runs_it():
    project = _project()
    extras = project["optional-dependencies"]
    core = _closure(project["dependencies"])
    spark = core | _closure(extras["spark"])
    test = core | _closure(extras["test"])
    assert "pyspark" not in core and "pandas" not in core and "pyspark" in spark
    assert not {"pytest", "moto", "playwright", "awscli"} & core
    providers = importlib.metadata.packages_distributions()
    plugins = _plugin_modules()
    wrong = set()
    for module, path in _modules():
        allowed = spark if module.startswith("kinesim.analytics") else test if module in plugins else core
        for name, _ in _imports(module, path):
            top = name.partition(".")[0]
            if top in FIRST_PARTY or top in sys.stdlib_module_names:
                continue
            dists = {_name(d) for d in providers.get(top, [])}
            if not dists & allowed:
                wrong.add(f"{module} imports {top} ({', '.join(sorted(dists)) or 'installed by nothing'})")
    assert not wrong, "imports the module's install lacks:\n" + "\n".join(sorted(wrong))


def test_spark_is_imported_at_module_level_only_by_what_spark_runs():
    project = _project()
    extra_only = _closure(project["optional-dependencies"]["spark"]) - _closure(project["dependencies"])
    providers = importlib.metadata.packages_distributions()
    eager = set()
    for module, path in _modules():
        if module in SPARK_ONLY:
            continue
        for name, at_module_level in _imports(module, path):
            if not at_module_level:
                continue
            spark_module = name in SPARK_ONLY or any(name.startswith(m + ".") for m in SPARK_ONLY)
            if spark_module or {_name(d) for d in providers.get(name.partition(".")[0], [])} & extra_only:
                eager.add(f"{module}: {name}")
    assert not eager, "Spark imported at module level (import it where Spark is used):\n" + "\n".join(sorted(eager))


# ---------------------------------------------------------------------------- without the extras

BLOCKER = """\
import os, sys

BLOCKED = set(os.environ["KINESIM_TEST_UNINSTALLED"].split(","))


class Uninstalled:
    \"\"\"Makes these packages unimportable, as in an install without them.\"\"\"

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Uninstalled())
"""


def _without_extras(tmp_path) -> dict[str, str]:
    """An environment whose Pythons cannot import Spark's packages nor the tests' tools."""
    site = tmp_path / "uninstalled"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCKER)
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, PYTHONPATH=path, KINESIM_TEST_UNINSTALLED=",".join(SPARK_IMPORTS + TEST_IMPORTS))


def _kinesim(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kinesim", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def _expected(what: str) -> str:
    return spark_extra.message(what, [m for m in spark_extra.MODULES if m.partition(".")[0] in SPARK_IMPORTS])


def test_spark_commands_without_spark_say_how_to_add_it(tmp_path):
    env = _without_extras(tmp_path)
    check = subprocess.run([sys.executable, "-c", "import pyspark"], env=env, capture_output=True, text=True)
    assert check.returncode == 1 and "No module named 'pyspark'" in check.stderr  # the blocker works

    line = _expected("kinesim sql")
    assert line.startswith("kinesim sql needs Spark") and "pip install 'kinesim[spark]'" in line
    unreachable = f"http://127.0.0.1:{free_port()}"  # said before any server is asked
    for args in (["SELECT 1"], ["--continuous", "--print", "SELECT * FROM STREAM clicks"], ["--shell"]):
        done = _kinesim(env, "sql", *args, "--endpoint-url", unreachable)
        assert (done.returncode, done.stderr, done.stdout) == (1, line + "\n", ""), args

    port = free_port()
    done = _kinesim(env, "serve", "--spark", "--in-memory", "--port", str(port))
    assert (done.returncode, done.stderr.strip()) == (1, _expected("kinesim serve --spark"))

    done = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        from kinesim.analytics import connect
        try:
            connect("http://127.0.0.1:9")
        except ImportError as error:
            print(type(error).__name__, error)
        """)], env=env, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "SparkMissing " + _expected("kinesim.analytics.connect()"), done.stderr

    # What needs no Spark is unchanged: the commands' help, `kinesim sql --help` included.
    for args in (["--help"], ["sql", "--help"], ["queries", "--help"], ["tail", "--help"]):
        done = _kinesim(env, *args)
        assert done.returncode == 0 and done.stdout, (args, done.stderr)


def test_a_server_without_spark_serves_everything_else(tmp_path):
    env = _without_extras(tmp_path)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "server.log"
    with open(log, "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "kinesim", "serve", "--port", str(port), "--data-dir",
                                 str(tmp_path / "data"), "--create-stream-ms", "0", "--firehose-interval-scale",
                                 "0.01", "--log-level", "warning"], env=env, stderr=stderr)
    try:
        wait_ready(url, 60, proc)
        kinesis = client_for(url, "kinesis")
        kinesis.create_stream(StreamName="clicks", ShardCount=1)
        kinesis.put_record(StreamName="clicks", Data=b'{"page": "/"}', PartitionKey="p")
        shard = kinesis.list_shards(StreamName="clicks")["Shards"][0]["ShardId"]
        iterator = kinesis.get_shard_iterator(StreamName="clicks", ShardId=shard,
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        assert [r["Data"] for r in kinesis.get_records(ShardIterator=iterator)["Records"]] == [b'{"page": "/"}']

        s3 = client_for(url, "s3", s3={"addressing_style": "path"})
        bucket = "bkt-" + uuid.uuid4().hex[:10]
        s3.create_bucket(Bucket=bucket)
        firehose = client_for(url, "firehose")
        firehose.create_delivery_stream(DeliveryStreamName="archive", ExtendedS3DestinationConfiguration={
            "RoleARN": "arn:aws:iam::000000000000:role/firehose", "BucketARN": f"arn:aws:s3:::{bucket}",
            "BufferingHints": {"IntervalInSeconds": 60, "SizeInMBs": 1}})
        firehose.put_record(DeliveryStreamName="archive", Record={"Data": b"delivered\n"})
        [found] = wait_for(lambda: s3.list_objects_v2(Bucket=bucket).get("Contents"), timeout=60)
        assert s3.get_object(Bucket=bucket, Key=found["Key"])["Body"].read() == b"delivered\n"

        # The console, its queries page included (it reads what is on disk: no Spark runs).
        for path in ("/_kinesim/console/", "/_kinesim/console/api/queries"):
            with urllib.request.urlopen(url + path, timeout=30) as answer:
                assert answer.status == 200, path
        done = _kinesim(env, "queries", "--endpoint-url", url)  # listed without Spark: none yet
        assert done.returncode == 0 and "no continuous queries" in done.stderr, done.stderr
        # A query kept on disk (as an install with Spark left it) is listed and stopped without Spark;
        # resuming it needs Spark, and says so.
        directory = continuous.queries_dir(state_dir(server_info(url)["s3_root"]))
        continuous.save(directory, continuous.Query(name="views", sql="SELECT * FROM STREAM clicks", endpoint_url=url,
                                                    into="views-out", into_kind="stream"))
        done = _kinesim(env, "queries", "list", "--format", "json", "--endpoint-url", url)
        assert done.returncode == 0 and json.loads(done.stdout)["state"] == "stopped with Spark", done.stderr
        done = _kinesim(env, "queries", "resume", "views", "--endpoint-url", url)
        assert (done.returncode, done.stderr) == (1, _expected("kinesim queries resume") + "\n")
        done = _kinesim(env, "queries", "stop", "views", "--endpoint-url", url)
        assert done.returncode == 0 and "it will not be resumed" in done.stderr, done.stderr
        # The sql command reaches the server only with Spark: it says so, and the server is unharmed.
        done = _kinesim(env, "sql", "SELECT 1", "--endpoint-url", url)
        assert (done.returncode, done.stderr) == (1, _expected("kinesim sql") + "\n")

        with urllib.request.urlopen(url + "/_kinesim/modules", timeout=10) as answer:
            loaded = set(json.load(answer)["modules"])
        assert not loaded & set(SPARK_IMPORTS + TEST_IMPORTS), sorted(loaded & set(SPARK_IMPORTS + TEST_IMPORTS))
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(60)
    errors = log.read_text()
    assert "Traceback" not in errors and "No module named" not in errors, errors
