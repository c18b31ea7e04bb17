"""Spark is an extra of kinesim's install: `pip install 'kinesim[spark]'` (`make serve` installs it).

The server and every command but Spark's run without it. What needs Spark (`kinesim sql`, `kinesim
queries resume`, `kinesim serve --spark`, `kinesim.analytics.connect()`) asks `missing()` first and
says in one line how to add it, rather than failing on an import halfway through. Nothing here
imports Spark: `find_spec` only looks for the packages.
"""
from __future__ import annotations

import importlib.util
import sys

# The import names of the `spark` extra's packages (pyproject.toml): PySpark, and what its Spark
# Connect client imports (the warm Spark server is reached through it).
MODULES = ("pyspark", "py4j", "pandas", "grpc", "grpc_status", "google.rpc", "zstandard")
INSTALL = "pip install 'kinesim[spark]'"


class SparkMissing(ImportError):
    """Spark's packages are not installed; the message says how to add them."""


def _importable(name: str) -> bool:
    if name in sys.modules:
        return sys.modules[name] is not None  # None: an import known to fail
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a missing parent package; a module without a spec
        return False


def missing() -> list[str]:
    """The extra's packages this Python cannot import (none when Spark is installed)."""
    return [name for name in MODULES if not _importable(name)]


def message(what: str, gone: list[str] | None = None) -> str:
    """One line: `what` needs Spark, and how to install it (naming what is missing when PySpark is there)."""
    gone = missing() if gone is None else gone
    lacking = "" if "pyspark" in gone else f" (missing: {', '.join(gone)})"
    return (f"{what} needs Spark, an extra of kinesim's install{lacking}: {INSTALL} "
            f"(in a kinesim checkout, `make serve` installs it)")


def require(what: str) -> None:
    """Raise SparkMissing, saying what needs Spark and how to add it, unless Spark is installed."""
    gone = missing()
    if gone:
        raise SparkMissing(message(what, gone))
