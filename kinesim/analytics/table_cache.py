"""Tables kept in the warm Spark's memory between commands, so that a warm `kinesim sql` does not
read every delivered object again for every query.

Each `kinesim sql` registers the tables afresh (a snapshot of what was delivered), and Spark read
every object for every query: over a million JSON records, ~1 s of a warm count on a quiet 2-core
machine and 3-5 s with one core busy (bench/README.md). Spark keeps a DataFrame's rows in memory,
columnar and compressed (``DataFrame.cache``), in a cache every session of one Spark shares, and
answers any later DataFrame with the same plan (the same files, read the same way) from it: a
count over those million rows then takes ~0.2 s. So `WarmTables` keeps, per table, a *base*:

- a view tree of its own that never changes (``<data dir>/spark-connect/warm/trees/``, links to
  the objects as `view_tree` lays them out), so that the plan over it stays the same from command
  to command, and its DataFrame cached in the warm Spark (filled by the first query that reads it,
  which takes about twice as long as a read without cache);
- a record of it (``warm/<digest>.json``): its objects (key, size, mtime), how they were read (for
  JSON the records' schema), its columns.

A command uses the base when every object in it is still there, unchanged, and the table is read
the same way (the same schema); objects delivered since (*fresh*) are read from the command's own
view tree and appended (``union``) while they are few (`FRESH_OBJECTS`, `FRESH_SHARE` of the base's
bytes) and have the base's columns (partition column types included). Otherwise (the first command,
an object deleted or rewritten, a new field, too many fresh objects) a new base of every object is
made and the old one dropped from Spark's memory (its tree is deleted one base later: a query of
another command may still read it). Every query thus answers from what was delivered when its
command started, as before, and a delivered object is in the next command's answer.

Tables above `MAX_BYTES` (the objects' size on disk) are not kept: they are read as before. After
Spark restarts, a base is cached again by the next command that uses it. Only kinesim's warm Spark
keeps bases (`kinesim sql`, `connect()`): a Spark in the command's own process (``--master``) ends
with the command.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

VERSION = 2
FRESH_OBJECTS = 64
FRESH_SHARE = 0.25
MAX_BYTES = 256 << 20
COPIES_KEPT_S = 3600.0   # a decompressed copy no base links to is deleted once this old


@dataclass
class Warm:
    frame: Any            # the table's DataFrame
    state: str            # "kept", "kept+fresh", "new" or "not kept"


def _digest(text: str, size: int = 24) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:size]


def _is_cached(df: Any) -> bool:
    level = df.storageLevel
    return bool(level.useMemory or level.useDisk)


class WarmTables:
    """Bases of tables (see the module's docstring) recorded in `directory`; `salt` is what else
    their rows depend on (PySpark's version, the session's Spark settings)."""

    def __init__(self, directory: str, salt: str = ""):
        import pyspark
        self.directory = directory
        self.trees = os.path.join(directory, "trees")
        self.copies = os.path.join(directory, "decompressed")
        self.salt = f"{VERSION}/{pyspark.__version__}/{salt}"

    @contextlib.contextmanager
    def _locked(self, key: str) -> Iterator[None]:
        """One command at a time decides a table's base (two at once would both cache one)."""
        os.makedirs(self.directory, exist_ok=True)
        with open(os.path.join(self.directory, f"{key}.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _load(self, key: str, identity: str) -> dict | None:
        try:
            with open(os.path.join(self.directory, f"{key}.json")) as f:
                kept = json.load(f)
        except (OSError, ValueError):
            return None
        return kept if kept.get("identity") == identity else None

    def _save(self, key: str, record: dict) -> None:
        path = os.path.join(self.directory, f"{key}.json")
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(record, f)
        os.replace(tmp, path)

    def frame(self, name: str, identity: str, objects: Sequence[Any], how: str, make: Callable[[str, str], Any],
              build: Callable[[Sequence[Any], str], str], fresh_root: str) -> Warm:
        """The DataFrame of table `name` (`identity`: what its objects and layout are) over
        `objects` (table_sources.DeliveredObject), read `how` (for JSON, the records' schema).
        `make(root, how)` reads a view tree, `build(objects, parent)` lays one out in `parent`
        and returns it; `fresh_root` is where this command's trees go."""
        identity = f"{self.salt}\0{identity}"
        key = _digest(identity)
        files = {o.key: [o.size, o.mtime_ns] for o in objects}
        size = sum(o.size for o in objects)
        with self._locked(key):
            kept = self._load(key, identity)
            if kept is not None and kept["how"] == how and os.path.isdir(kept["root"]) \
                    and all(files.get(k) == v for k, v in kept["files"].items()):
                base = make(kept["root"], how)
                fresh = [o for o in objects if o.key not in kept["files"]]
                if len(fresh) <= FRESH_OBJECTS and sum(o.size for o in fresh) <= FRESH_SHARE * max(kept["bytes"], 1):
                    if not _is_cached(base):   # this Spark started after the base was made
                        base.cache()
                    if not fresh:
                        return Warm(base, "kept")
                    extra = make(build(fresh, fresh_root), how)
                    if extra.schema.json() == kept["schema"]:
                        return Warm(base.union(extra), "kept+fresh")
            if size > MAX_BYTES:
                if kept is not None:   # it grew past the limit: read as it is from now on
                    self._drop(kept, make)
                    shutil.rmtree(kept["home"], ignore_errors=True)
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(self.directory, f"{key}.json"))
                return Warm(make(build(objects, fresh_root), how), "not kept")
            home = os.path.join(self.trees, f"{name}-{_digest(json.dumps([files, how]), 12)}")
            root = build(objects, home)
            df = make(root, how)
            df.cache()
            self._save(key, {"identity": identity, "how": how, "root": root, "home": home, "files": files,
                             "bytes": size, "schema": df.schema.json(), "previous": kept["home"] if kept else None,
                             "made": time.time()})
            if kept is not None:
                self._drop(kept, make, home)
            return Warm(df, "new")

    def _drop(self, old: dict, make: Callable[[str, str], Any], new_home: str | None = None) -> None:
        """Take an old base out of Spark's memory, delete the tree of the one before it (one
        base back: another command's query may still read the old one), and copies no base needs."""
        if old["home"] != new_home:   # (else it is the new base's plan: its tree had gone)
            with contextlib.suppress(Exception):   # its tree or Spark's cache entry may be gone already
                make(old["root"], old["how"]).unpersist()
        if old.get("previous") and old["previous"] not in (old["home"], new_home):   # (the same objects again)
            shutil.rmtree(old["previous"], ignore_errors=True)
        self._collect_copies()

    def _collect_copies(self) -> None:
        """Decompressed copies (ZIP, snappy-java... objects) that no base's tree links to and that
        are older than COPIES_KEPT_S: their objects are gone, or a command made them and will again."""
        if not os.path.isdir(self.copies):
            return
        linked = set()
        for directory, _, names in os.walk(self.trees):
            for name in names:
                with contextlib.suppress(OSError):
                    linked.add(os.path.realpath(os.path.join(directory, name)))
        old = time.time() - COPIES_KEPT_S
        for name in os.listdir(self.copies):
            path = os.path.join(self.copies, name)
            with contextlib.suppress(OSError):
                if os.path.realpath(path) not in linked and os.stat(path).st_mtime < old:
                    os.unlink(path)
