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
                    "kinesim.analytics", "kinesim.console", "flask")


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


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[:len(parts) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


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


def test_the_server_starts_without_the_deploy_engine():
    """CloudFormation's engine (the SAM translator, YAML, the resource handlers: ~0.7 s of imports)
    is loaded on the first CloudFormation request, not when the server starts."""
    script = ("import sys, kinesim.edge\n"
              "print('\\n'.join(sorted(m for m in sys.modules if m.split('.')[0] == 'samtranslator'\n"
              "                        or m == 'kinesim.deploy' or m.startswith('kinesim.deploy.'))))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [], f"importing kinesim.edge also imported: {done.stdout.split()}"
