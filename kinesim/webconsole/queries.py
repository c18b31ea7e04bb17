"""The console's continuous queries page, its stop/resume actions, and the queries' overview rows.

GET  /api/queries              {"spark": {"running", "address"}, "live_at" (ms or null), "live_error",
                               "queries": [QUERY...]}; in a scope other than the server's own,
                               no queries and a "note" saying where they are (see _ELSEWHERE)
POST /api/queries/NAME/stop    {} -> {"name", "action": "stop", "state": "stopping"}
POST /api/queries/NAME/resume  {} -> {"name", "action": "resume", "state": "resuming"}

A QUERY: {"name", "state" (running, stopped, failed, "stopped with Spark", checking, stopping,
resuming), "wanted" (running or stopped: what the user asked last), "sql", "into", "into_kind",
"streams" (read), "output_mode", "trigger", "event_time", "watermark_delay", "error",
"input_rows_per_s" (from the checkpoint: records read by the batches of the last RATE_WINDOW_S, per
second), "processed_rows_per_s" (Spark's, of its last batch: live, else null), "watermark" (live,
Spark's text, else null),
"last_batch": {"id", "started" (ms), "committed" (ms or null), "watermark" (ms or null)} or null,
"action": {"action", "started" (ms), "done", "error", "ended" (ms)} or null}.

Queries run in kinesim's warm Spark, which this process must not load (pyspark's import costs
seconds and memory). So what is on disk is read here (the query's definition, whether it should run,
its last error, and Spark's checkpoint: offsets/N and commits/N give the last batch, its start time
and watermark), and live progress comes from `kinesim queries list --format json` run as a
subprocess in a background thread while Spark runs: at most every LIVE_EVERY_S while this page is
polled, every OVERVIEW_LIVE_EVERY_S while only the overview is. Stop and resume are `kinesim queries stop|resume NAME`, also in the background (a resume
may start Spark: a minute); the page shows "stopping"/"resuming" until the command ends.
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any

from flask import Flask, request

from ..analytics import continuous
from ..analytics.connect_server import running as spark_address, state_dir
from ..kinesis import sequence
from .http import API, acts, reads
from .pages import PREFIX
from .scope import scope_for

if TYPE_CHECKING:
    from ..edge import Edge
    from ..scope_services import ScopeServices

log = logging.getLogger("kinesim.webconsole")

LIVE_EVERY_S = 5.0        # at most one `kinesim queries list` this often
OVERVIEW_LIVE_EVERY_S = 20.0  # the overview asks for less (each listing costs a Python start, ~2 s of CPU)
LIVE_KEPT_S = 60.0        # live figures older than this are not shown
LIST_TIMEOUT_S = 120.0
ACTION_TIMEOUT_S = 600.0  # a resume that starts Spark and replans the query
ACTIONS = ("stop", "resume")
RATE_WINDOW_S = 30        # input rows/s: the records read by the batches of the last 30 s
RATE_BATCHES = 200        # offsets files read for it at most


def add_routes(app: Flask, edge: "Edge") -> None:
    @app.get(API + "/queries")
    @reads
    def queries_list() -> dict[str, Any]:
        watch = _watch(edge)
        if scope_for(edge, request) is not edge.own_scope:
            return {**watch.snapshot(), "queries": [], "note": _ELSEWHERE.format(edge.default_scope)}
        watch.refresh_live()
        return watch.snapshot()

    @app.post(API + "/queries/<name>/<action>")
    @acts
    def queries_act(name: str, action: str, body: dict[str, Any]) -> dict[str, Any]:
        if action not in ACTIONS:
            raise LookupError(f"No action {action!r} for a continuous query (stop or resume)")
        if scope_for(edge, request) is not edge.own_scope:
            raise LookupError(_ELSEWHERE.format(edge.default_scope))
        return _watch(edge).act(name, action)


# A query names its streams, not their account or region, and kinesim records none for it: its
# queries are shown as the server's own scope's, whose streams they read unless Spark was given
# other credentials.
_ELSEWHERE = "Continuous queries are listed under the server's own account ({0.account}) and region ({0.region})"


def overview_rows(scope: "ScopeServices") -> dict[str, list[dict[str, Any]]]:
    if scope is not scope.root.own_scope:
        return {"queries": []}
    watch = _watch(scope.root)
    watch.refresh_live(every=OVERVIEW_LIVE_EVERY_S)
    rows = []
    for q in watch.snapshot()["queries"]:
        health = [f"{q['input_rows_per_s']:,.1f} rows/s in" if q["input_rows_per_s"] is not None else None,
                  _batch_text(q["last_batch"]), f"into {q['into']}" if q["into"] else None,
                  f"error: {q['error']}" if q["error"] else None]
        rows.append({"name": q["name"], "href": f"{PREFIX}/queries", "state": q["state"],
                     "health": " · ".join(h for h in health if h),
                     "figures": {"in/s": q["input_rows_per_s"],
                                 "batch": q["last_batch"]["id"] if q["last_batch"] else None}})
    return {"queries": rows}


def _batch_text(batch: dict[str, Any] | None) -> str:
    if batch is None:
        return "no batch yet"
    done = batch["committed"] or batch["started"]
    return f"batch {batch['id']} {time.strftime('%H:%M:%S', time.localtime(done / 1000))}" if done \
        else f"batch {batch['id']}"


# ------------------------------------------------------------------ the watch of one server's queries

_WATCHES: "weakref.WeakKeyDictionary[Edge, Watch]" = weakref.WeakKeyDictionary()
_WATCHES_LOCK = threading.Lock()


def _watch(edge: "Edge") -> "Watch":
    with _WATCHES_LOCK:
        found = _WATCHES.get(edge)
        if found is None:
            found = _WATCHES[edge] = Watch(edge)
        return found


class Watch:
    """What is known of the queries of one kinesim server: its queries directory, the last live
    listing, and the actions under way."""

    def __init__(self, edge: "Edge"):
        self.endpoint = edge.settings.local_url
        self.spark_dir = state_dir(edge.objects.root)
        self.directory = continuous.queries_dir(self.spark_dir)
        self.lock = threading.Lock()
        self.live: dict[str, dict[str, Any]] = {}
        self.live_at: float | None = None      # epoch s of the listing in `live`
        self.live_error: str | None = None
        self.listing = False                   # a `kinesim queries list` runs
        self.asked_at = 0.0                    # monotonic: when the last one started
        self.actions: dict[str, dict[str, Any]] = {}

    # live progress

    def refresh_live(self, every: float = LIVE_EVERY_S, force: bool = False) -> None:
        """Start a `kinesim queries list` in the background if the last started `every` seconds ago
        or more (or `force`) and Spark runs; never waits for it."""
        with self.lock:
            if self.listing or (not force and time.monotonic() - self.asked_at < every):
                return
            if not continuous.names(self.directory) or spark_address(self.spark_dir) is None:
                return
            self.listing, self.asked_at = True, time.monotonic()
        threading.Thread(target=self._list, name="console-queries-list", daemon=True).start()

    def _list(self) -> None:
        started = time.time()
        try:
            done = self._kinesim("queries", "list", "--format", "json", timeout=LIST_TIMEOUT_S)
            if done.returncode == 0:
                rows = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
                with self.lock:
                    # A query an action changed meanwhile is left out: this listing may predate it.
                    self.live = {r["name"]: r for r in rows if not self._changed_since(r["name"], started)}
                    self.live_at, self.live_error = time.time(), None
            else:
                with self.lock:
                    self.live_error = _last_line(done.stderr) or f"kinesim queries list exited with {done.returncode}"
        except (OSError, subprocess.SubprocessError, ValueError) as err:
            with self.lock:
                self.live_error = f"kinesim queries list: {err}"
        finally:
            with self.lock:
                self.listing = False
                again = any(a["done"] and a["ended"] > started * 1000 for a in self.actions.values())
            if again:
                self.refresh_live(force=True)

    def _changed_since(self, name: str, since: float) -> bool:
        action = self.actions.get(name)
        return action is not None and (not action["done"] or action["ended"] > since * 1000)

    def _kinesim(self, *args: str, timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "kinesim", *args, "--endpoint-url", self.endpoint],
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    # actions

    def act(self, name: str, action: str) -> dict[str, Any]:
        if name not in continuous.names(self.directory):
            raise LookupError(f"No continuous query named {name!r}")
        with self.lock:
            under_way = self.actions.get(name)
            if under_way is not None and not under_way["done"]:
                raise ValueError(f"{name} is {_doing(under_way['action'])} already")
            self.actions[name] = {"action": action, "started": int(time.time() * 1000), "done": False, "error": None,
                                 "ended": None}
        threading.Thread(target=self._run_action, args=(name, action), name=f"console-queries-{action}",
                         daemon=True).start()
        return {"name": name, "action": action, "state": _doing(action)}

    def _run_action(self, name: str, action: str) -> None:
        error = None
        try:
            done = self._kinesim("queries", action, name, timeout=ACTION_TIMEOUT_S)
            if done.returncode != 0:
                error = _last_line(done.stderr) or f"kinesim queries {action} exited with {done.returncode}"
        except (OSError, subprocess.SubprocessError) as err:
            error = f"kinesim queries {action}: {err}"
        if error:
            log.warning("console: kinesim queries %s %s failed: %s", action, name, error)
        with self.lock:
            self.actions[name].update(done=True, error=error, ended=int(time.time() * 1000))
            self.live.pop(name, None)  # listed before the action: the disk says more until the next listing
        self.refresh_live(force=True)

    # the page's document

    def snapshot(self) -> dict[str, Any]:
        address = spark_address(self.spark_dir)
        with self.lock:
            fresh = self.live_at is not None and time.time() - self.live_at < LIVE_KEPT_S
            live = dict(self.live) if fresh and address else {}
            live_at, live_error = self.live_at, self.live_error
            actions = {n: dict(a) for n, a in self.actions.items()}
        rows = []
        for name in continuous.names(self.directory):
            try:
                query = continuous.load(self.directory, name)
            except (continuous.QueryError, OSError, ValueError):  # being deleted, or half written
                continue
            rows.append(_row(query, live.get(name), address is not None, actions.get(name),
                             continuous.checkpoint_dir(self.directory, name)))
        return {"spark": {"running": address is not None, "address": address},
                "live_at": int(live_at * 1000) if live_at and address else None, "live_error": live_error,
                "queries": rows}


def _row(query: continuous.Query, live: dict[str, Any] | None, spark_runs: bool, action: dict[str, Any] | None,
         checkpoint: str) -> dict[str, Any]:
    if action is not None and not action["done"]:
        state = _doing(action["action"])
    elif live is not None:
        state = live["state"]
    elif query.error:
        state = "failed"
    elif not query.running:
        state = "stopped"
    else:
        state = "checking" if spark_runs else "stopped with Spark"
    live = live or {}
    return {"name": query.name, "state": state, "wanted": "running" if query.running else "stopped",
            "sql": query.sql, "into": query.into, "into_kind": query.into_kind,
            "streams": continuous.stream_refs(query.sql), "output_mode": query.output_mode,
            "trigger": query.trigger, "event_time": query.event_time, "watermark_delay": query.watermark,
            "error": (live.get("error") or query.error) if state != "running" else None,
            "processed_rows_per_s": live.get("processed_rows_per_s"),
            "watermark": live.get("watermark"), **checkpoint_progress(checkpoint), "action": action}


def checkpoint_progress(checkpoint: str, now: float | None = None) -> dict[str, Any]:
    """What Spark's checkpoint says: {"last_batch": {"id", "started" (ms), "committed" (ms or
    null), "watermark" (ms or null)} or null, "input_rows_per_s"}. A batch's offsets file (offsets/N)
    holds its start time and watermark, then each source's offset: kinesim's source gives the
    sequence number read last per shard, whose record index counts the records read. Input rows/s
    is the records read by the batches that started in the last RATE_WINDOW_S, over that window."""
    directory = os.path.join(checkpoint, "offsets")
    try:
        ids = sorted((int(n) for n in os.listdir(directory) if n.isdigit()), reverse=True)
    except OSError:
        ids = []
    if not ids:
        return {"last_batch": None, "input_rows_per_s": None}
    since = ((time.time() if now is None else now) - RATE_WINDOW_S) * 1000
    newest = base = _offsets(os.path.join(directory, str(ids[0])))
    for batch_id in ids[1:RATE_BATCHES]:
        if (base["meta"].get("batchTimestampMs") or 0) < since:
            break
        base = _offsets(os.path.join(directory, str(batch_id)))
    read = 0
    if (newest["meta"].get("batchTimestampMs") or 0) >= since:
        read = sum(max(0, index - base["indexes"].get(shard, index)) for shard, index in newest["indexes"].items())
    try:
        committed: int | None = int(os.stat(os.path.join(checkpoint, "commits", str(ids[0]))).st_mtime * 1000)
    except OSError:
        committed = None
    meta = newest["meta"]
    return {"last_batch": {"id": ids[0], "started": meta.get("batchTimestampMs"), "committed": committed,
                           "watermark": meta.get("batchWatermarkMs") or None},
            "input_rows_per_s": round(read / RATE_WINDOW_S, 1)}


def _offsets(path: str) -> dict[str, Any]:
    """{"meta": the batch's metadata, "indexes": {(source, shard): record index read last}}."""
    meta: dict[str, Any] = {}
    indexes: dict[tuple[int, str], int] = {}
    try:
        with open(path) as f:
            lines = f.read().splitlines()
        meta = json.loads(lines[1]) if len(lines) > 1 else {}
        for source, line in enumerate(lines[2:]):
            offset = json.loads(line) if line.startswith("{") else {}
            for shard, seq in (offset.get("shards") or {}).items():
                parsed = sequence.parse(seq) if isinstance(seq, str) else None
                if parsed is not None:
                    indexes[source, shard] = parsed.record_index
    except (OSError, ValueError, AttributeError):  # being written, or not kinesim's source
        pass
    return {"meta": meta if isinstance(meta, dict) else {}, "indexes": indexes}


def _doing(action: str) -> str:
    return {"stop": "stopping", "resume": "resuming"}[action]


def _last_line(text: str) -> str | None:
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else None
