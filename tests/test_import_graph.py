"""The package's import graph: no cycles, and Kinesis stands alone.

The graph is read with `ast` from every .py file under kinesim/ and firehose/ (nothing is
imported to build it). Its edges are the imports a module runs: at module level and inside
functions alike (a function-level import is still a run-time dependency). Imports inside an
`if TYPE_CHECKING:` block are left out: they only serve type checkers and never run, which is
how an operation module names its service's type without importing the service.

`from X import a` is an edge to X (its `__init__` runs) and, when `X.a` is a module, to `X.a`.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kinesim", "firehose")

# What importing every module of kinesim.kinesis must not bring in: the other services, the edge
# and the web framework of the admin routes.
NOT_FROM_KINESIS = ("kinesim.functions", "firehose", "kinesim.s3", "kinesim.sqs", "kinesim.sns",
                    "kinesim.logs", "kinesim.deploy", "kinesim.edge", "kinesim.services", "kinesim.admin", "kinesim.server",
                    "kinesim.analytics", "kinesim.stream_cli", "kinesim.webconsole", "kinesim.kafka", "flask")

# What the Kafka listener (kinesim/kafka) may import of kinesim: it serves the Kinesis streams
# through the kinesis package, and the server hands it the services it needs.
KAFKA_MAY_IMPORT = ("kinesim.kafka", "kinesim.kinesis", "kinesim.protocol", "kinesim.scopes")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
           (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Every Import / ImportFrom node that can run: the bodies of `if TYPE_CHECKING:` skipped."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _from_base(node: ast.ImportFrom, package: str) -> str:
    """The module a `from ... import` names, relative imports resolved against `package`."""
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        parts = parts[:len(parts) - node.level + 1]
        base = ".".join(parts + ([node.module] if node.module else []))
    return base


def _package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = _package_of(name, path)
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _from_base(node, package)
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def private_names_used(importer: str, provider: str) -> list[str]:
    """The `_private` names that modules of package `importer` take from modules of `provider`:
    `from provider.x import _name`, and `x._name` where `x` was imported from `provider`."""
    found = []
    for name, path in _modules().items():
        if not _within(name, importer):
            continue
        tree = ast.parse(path.read_text(), str(path))
        bound: set[str] = set()  # local names of provider's modules
        for node in _imports(tree):
            if isinstance(node, ast.ImportFrom):
                base = _from_base(node, _package_of(name, path))
                if not _within(base, provider):
                    continue
                for alias in node.names:
                    if alias.name.startswith("_"):
                        found.append(f"{name}: from {base} import {alias.name}")
                    bound.add(alias.asname or alias.name)
            else:
                bound.update(alias.asname or alias.name.split(".")[0] for alias in node.names
                             if _within(alias.name, provider) and (alias.asname or "." not in alias.name))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound \
                    and node.attr.startswith("_") and not node.attr.startswith("__"):
                found.append(f"{name}: {node.value.id}.{node.attr}")
    return sorted(found)


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as [a, b, ..., a], or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if start in state:
            continue
        path, iters = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while path:
            nxt = next(iters[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                iters.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                iters.append(iter(sorted(graph[nxt])))
    return None


def test_find_cycle_reports_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_typing_only_imports_are_not_edges():
    tree = ast.parse("from typing import TYPE_CHECKING\n"
                     "if TYPE_CHECKING:\n    import x\nelse:\n    import y\n"
                     "def f():\n    import z\n")
    assert sorted(a.name for node in _imports(tree) for a in node.names) == ["TYPE_CHECKING", "y", "z"]


def test_the_package_has_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 100 and "kinesim.kinesis.service" in graph
    assert "kinesim.kinesis.operations" in graph["kinesim.kinesis.service"]
    cycle = find_cycle(graph)
    if cycle is not None:
        print("import cycle:", " -> ".join(cycle))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_only_the_server_imports_the_edge():
    """The edge wires services together; no service reaches back into it (a streaming answer such
    as SubscribeToShard's is a `kinesim.protocol.eventstream.EventStream`, which the edge sends)."""
    graph = import_graph()
    assert sorted(name for name, deps in graph.items() if "kinesim.edge" in deps) == ["kinesim.server"]
    assert "kinesim.protocol.eventstream" in graph["kinesim.kinesis.consumers"]


def test_importing_kinesis_pulls_in_no_other_service():
    kinesis = sorted(name for name in _modules()
                     if name == "kinesim.kinesis" or name.startswith("kinesim.kinesis."))
    script = ("import importlib, sys\n"
              f"for name in {kinesis!r}:\n"
              "    importlib.import_module(name)\n"
              f"bad = sorted(m for m in sys.modules\n"
              f"             if any(m == p or m.startswith(p + '.') for p in {NOT_FROM_KINESIS!r}))\n"
              "print('\\n'.join(bad))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [], f"importing kinesim.kinesis also imported: {done.stdout.split()}"


def test_kafka_builds_on_kinesis_only():
    graph = import_graph()
    kafka = [name for name in graph if _within(name, "kinesim.kafka")]
    assert "kinesim.kafka.listener" in kafka
    outside = sorted(f"{name} -> {dep}" for name in kafka for dep in graph[name]
                     if not any(_within(dep, allowed) for allowed in KAFKA_MAY_IMPORT) and dep != "kinesim")
    assert outside == []
    assert not [name for name, deps in graph.items()
                if _within(name, "kinesim.kinesis") and any(_within(d, "kinesim.kafka") for d in deps)]


def test_the_server_starts_without_the_deploy_engine():
    """CloudFormation's engine (the SAM translator, YAML, the resource handlers: ~0.7 s of imports)
    is loaded on the first CloudFormation request, not when the server starts."""
    script = ("import sys, kinesim.edge\n"
              "print('\\n'.join(sorted(m for m in sys.modules if m.split('.')[0] == 'samtranslator'\n"
              "                        or m == 'kinesim.deploy' or m.startswith('kinesim.deploy.'))))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [], f"importing kinesim.edge also imported: {done.stdout.split()}"


# The deploy engine and the CloudFormation API around it: the API uses the engine through its
# public names only, and the engine (which `kinesim deploy` and nested stacks also drive) knows
# nothing of the API's modules.

def test_the_deploy_engine_imports_nothing_of_the_cloudformation_api():
    graph = import_graph()
    found = sorted(f"{name} -> {dep}" for name, deps in graph.items() if _within(name, "kinesim.deploy")
                   for dep in deps if _within(dep, "kinesim.cloudformation"))
    assert found == [], found
    assert "kinesim.deploy.template_url" in graph["kinesim.deploy.stack_resources"]


def test_the_cloudformation_api_takes_no_private_name_of_the_engine():
    assert private_names_used("kinesim.cloudformation", "kinesim.deploy") == []
    # change sets still use the engine's plan, by its public names (plan.as_stored, plan.decide)
    assert "kinesim.deploy.plan" in import_graph()["kinesim.cloudformation.changes"]


def test_private_names_used_finds_both_forms(tmp_path, monkeypatch):
    tree = ast.parse("from kinesim.deploy.plan import _x, y\nfrom kinesim.deploy import plan as p\np._z\ny._w\n")
    path = tmp_path / "m.py"
    path.write_text(ast.unparse(tree))
    monkeypatch.setattr(sys.modules[__name__], "_modules", lambda: {"kinesim.cloudformation.m": path})
    assert private_names_used("kinesim.cloudformation", "kinesim.deploy") == [
        "kinesim.cloudformation.m: from kinesim.deploy.plan import _x", "kinesim.cloudformation.m: p._z",
        "kinesim.cloudformation.m: y._w"]


# Analytics reads what Firehose delivered through firehose.layout alone (which keys, which
# partitions, which compression), not through how Firehose names and writes objects.
FIREHOSE_FOR_READERS = {"firehose", "firehose.layout"}


def test_analytics_uses_only_firehoses_layout_interface():
    graph = import_graph()
    found = sorted(f"{name} -> {dep}" for name, deps in graph.items() if _within(name, "kinesim.analytics")
                   for dep in deps if _within(dep, "firehose") and dep not in FIREHOSE_FOR_READERS)
    assert found == [], found
    assert "firehose.layout" in graph["kinesim.analytics.table_sources"]
    assert private_names_used("kinesim.analytics", "firehose") == []
