"""The console's overview: every resource of the server, kind by kind, with its state and a line
of health, headline figures, and the size of the data directory.

GET /api/overview  {"kinds": [{"kind", "title", "rows": [ROW...]}...] in KINDS order,
                    "headline": {"counts": {kind: n}, "records_in_per_s", "invocations_per_s"},
                    "data_dir": {"path", "in_memory", "bytes", "files", "measured" (ms)}
                                (bytes, files and measured are null until first measured),
                    "errors": [{"area", "message"}]}
A ROW is what the area modules' `overview_rows(scope)` give (see the console's contract):
{"name", "href", "state", "health", "figures"}, and optionally "id" (what tells the row apart when
names may repeat, as mappings' UUIDs; else the name) and "detail" (a second line under the name).
An area that fails is reported in "errors" and its kinds are empty; the others are still shown.

The data directory's size is measured by walking it in a background thread, at most every
SIZE_EVERY_S while the overview is polled; an answer gives the last measure and never waits.
"""
from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any

from flask import Flask, request

from .buckets import overview_rows as buckets_rows
from .deliveries import overview_rows as deliveries_rows
from .functions import overview_rows as functions_rows
from .figures import tree_size
from .http import API, reads
from .others import overview_rows as others_rows
from .queries import overview_rows as queries_rows
from .scope import scope_for
from .streams import overview_rows as streams_rows

if TYPE_CHECKING:
    from ..edge import Edge
    from ..scope_services import ScopeServices

log = logging.getLogger("kinesim.webconsole")

SIZE_EVERY_S = 5.0
# The area modules' overview_rows (each gives the rows of one or more kinds).
AREAS = {"streams": streams_rows, "functions": functions_rows, "deliveries": deliveries_rows,
         "buckets": buckets_rows, "others": others_rows, "queries": queries_rows}
# (kind, title), in the order the page shows them
KINDS = (("streams", "Streams"), ("channels", "Channels"), ("functions", "Functions"),
         ("mappings", "Event source mappings"), ("delivery-streams", "Delivery streams"), ("buckets", "Buckets"),
         ("queues", "Queues"), ("topics", "Topics"), ("log-groups", "Log groups"), ("queries", "Continuous queries"))


def add_routes(app: Flask, edge: "Edge") -> None:
    @app.get(API + "/overview")
    @reads
    def overview_document() -> dict[str, Any]:
        return document(edge, scope_for(edge, request))


def document(edge: "Edge", scope: "ScopeServices") -> dict[str, Any]:
    """The overview of one scope's resources; the data directory is the whole server's."""
    found: dict[str, list[dict[str, Any]]] = {}
    errors = []
    for area, rows in AREAS.items():
        try:
            found.update(rows(scope))
        except Exception as err:  # one area's bug must not blank the whole overview
            log.exception("console: the overview rows of %s failed", area)
            errors.append({"area": area, "message": f"{type(err).__name__}: {err}"})
    kinds = [{"kind": kind, "title": title, "rows": found.get(kind, [])} for kind, title in KINDS]
    return {"kinds": kinds, "headline": _headline(found), "data_dir": _sizes(edge).get(), "errors": errors}


def _headline(found: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    def total(kind: str, figure: str) -> float:
        return round(sum((row.get("figures") or {}).get(figure) or 0 for row in found.get(kind, [])), 1)
    return {"counts": {kind: len(found.get(kind, [])) for kind, _ in KINDS},
            "records_in_per_s": total("streams", "records_per_s"), "invocations_per_s": total("functions", "per_s")}


# ------------------------------------------------------------------ the data directory's size

class DirectorySize:
    """The bytes and files under a directory, measured in a background thread at most every
    SIZE_EVERY_S (on demand: nothing runs while nobody looks). Links are not followed."""

    def __init__(self, path: str, in_memory: bool):
        self.path, self.in_memory = path, in_memory
        self.lock = threading.Lock()
        self.measured: tuple[float, int, int] | None = None   # (epoch s, bytes, files)
        self.measuring = False

    def get(self) -> dict[str, Any]:
        with self.lock:
            measured = self.measured
            due = not self.measuring and (measured is None or time.time() - measured[0] >= SIZE_EVERY_S)
            if due:
                self.measuring = True
        if due:
            threading.Thread(target=self._measure, name="console-data-dir-size", daemon=True).start()
        when, size, files = measured if measured is not None else (None, None, None)
        return {"path": self.path, "in_memory": self.in_memory, "bytes": size, "files": files,
                "measured": int(when * 1000) if when is not None else None}

    def _measure(self) -> None:
        try:
            files, size, _ = tree_size(self.path)
            with self.lock:
                self.measured = (time.time(), size, files)
        finally:
            with self.lock:
                self.measuring = False


_SIZES: "weakref.WeakKeyDictionary[Edge, DirectorySize]" = weakref.WeakKeyDictionary()
_SIZES_LOCK = threading.Lock()


def _sizes(edge: "Edge") -> DirectorySize:
    with _SIZES_LOCK:
        found = _SIZES.get(edge)
        if found is None:
            # The store's directory: the data directory, or the temporary one of an in-memory server.
            found = _SIZES[edge] = DirectorySize(os.path.dirname(os.path.abspath(edge.store.path)),
                                                 edge.settings.in_memory)
        return found
