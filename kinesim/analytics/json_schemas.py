"""JSON tables' schemas kept between commands, so that a warm `kinesim sql` does not read every
record again to infer them.

Spark infers a JSON table's schema by reading all of its records: at a million records that is
most of a warm command. `SchemaCache` keeps, per table, the schema Spark inferred and the objects
it was inferred from (key, size, mtime) in a directory beside the server's other state
(``<data dir>/spark-connect/schemas/``). The next command:

- nothing new: the kept schema, no record read;
- objects delivered since: Spark infers the schema of those only, merged into the kept one (new
  fields added: records that gained a field). The merge is exact only where Spark's own would
  give the same: fields of one type in both, or present on one side; any other difference (long
  against double, a field null so far, hence string, now a number, a struct against a string)
  makes Spark infer the whole table again, as does an object that was removed or rewritten, a
  failed partial inference, or another PySpark or other Spark settings;
- the view reads the files with that schema (`DataFrameReader.schema`), which skips inference.

Spark infers JSON structs with their fields sorted by name (Java's String order, UTF-16 code
units), and merges two structs into the sorted union of their fields: `merge` does the same, so
the kept schema is the one Spark would infer over all the objects.

Partition columns (``k=v/`` directories) are not in the kept schema: it is the records' schema
(inferred with ``recursiveFileLookup``, which turns partition discovery off), and Spark adds the
partition columns itself when the view reads the tree. A partition column that is also a
record field (dynamic partitioning by a field of the record) would then move to the end, and
take the record's type: such fields are left out of the given schema and the columns put back
in the order Spark's inference gives them (the field's place, the partition's type).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from typing import Any, Callable

VERSION = 1  # of the cache files' layout


def _name_order(name: str) -> bytes:
    return name.encode("utf-16-be", "surrogatepass")  # Java's String.compareTo order


def merge(old: Any, new: Any) -> Any:
    """The union of two inferred types, or None where Spark's merge could differ from it."""
    from pyspark.sql.types import ArrayType, StructField, StructType
    if old == new:
        return old
    if isinstance(old, StructType) and isinstance(new, StructType):
        fields = {f.name: f for f in old.fields}
        for f in new.fields:
            if f.name in fields:
                merged = merge(fields[f.name].dataType, f.dataType)
                if merged is None:
                    return None
                fields[f.name] = StructField(f.name, merged, True)
            else:
                fields[f.name] = f
        return StructType(sorted(fields.values(), key=lambda f: _name_order(f.name)))
    if isinstance(old, ArrayType) and isinstance(new, ArrayType):
        element = merge(old.elementType, new.elementType)
        return None if element is None else ArrayType(element, old.containsNull or new.containsNull)
    return None


class SchemaCache:
    """Inferred JSON schemas kept in `directory`, one file per table. `salt` is what else the
    inference depends on (PySpark's version and the session's Spark settings)."""

    def __init__(self, directory: str, salt: str = ""):
        import pyspark
        self.directory = directory
        self.salt = f"{VERSION}/{pyspark.__version__}/{salt}"

    def _path(self, identity: str) -> str:
        return os.path.join(self.directory, hashlib.sha1(identity.encode()).hexdigest()[:24] + ".json")

    def _load(self, identity: str) -> dict | None:
        try:
            with open(self._path(identity)) as f:
                kept = json.load(f)
        except (OSError, ValueError):
            return None
        return kept if kept.get("identity") == identity else None

    def _save(self, identity: str, files: dict[str, list[int]], schema: Any) -> None:
        try:
            os.makedirs(self.directory, exist_ok=True)
            path = self._path(identity)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                json.dump({"identity": identity, "files": files, "schema": schema.jsonValue()}, f)
            os.replace(tmp, path)  # two commands at once: the last one's, whole
        except OSError:
            pass  # a read-only data directory: the next command infers again

    def schema(self, identity: str, files: dict[str, list[int]], infer: Callable[[list[str] | None], Any]) -> Any:
        """The records' schema of a table whose objects are `files` (key -> [size, mtime_ns]).
        `infer(keys)` has Spark infer it from those objects (None: all of them)."""
        from pyspark.sql.types import StructType
        identity = f"{self.salt}\0{identity}"
        kept = self._load(identity)
        schema = None
        if kept is not None and all(files.get(k) == v for k, v in kept["files"].items()):
            old = StructType.fromJson(kept["schema"])
            added = [k for k in files if k not in kept["files"]]
            if not added:
                return old
            try:
                schema = merge(old, infer(added))
            except Exception:  # noqa: BLE001 - e.g. new objects with no record: infer the whole table
                schema = None
        if schema is None:
            schema = infer(None)
        self._save(identity, files, schema)
        return schema


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def table_schema(spark: Any, root: str, links: dict[str, str], files: dict[str, list[int]], identity: str,
                 cache: SchemaCache) -> Any:
    """The records' schema of the JSON table whose view tree is `root` (its objects' links by key
    in `links`), as Spark infers it over all of them, kept in `cache`."""
    def infer(keys: list[str] | None) -> Any:
        reader = spark.read.option("recursiveFileLookup", "true")
        if keys is None:
            return reader.json(root).schema
        # Only the new objects: links to them in a directory of their own.
        directory = tempfile.mkdtemp(prefix="new-", dir=os.path.dirname(root))
        try:
            for i, key in enumerate(keys):
                link = links[key]
                os.symlink(os.readlink(link), os.path.join(directory, f"{i}-{os.path.basename(link)}"))
            return reader.json(directory).schema
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    return cache.schema(identity, files, infer)


def read_with(spark: Any, root: str, schema: Any, partition_columns: list[str]) -> Any:
    """A DataFrame over a JSON view tree as ``spark.read.json(root)`` gives it, read with the
    records' `schema` (`table_schema`) instead of inferring it. The same arguments give the same
    plan, which is what lets a cached one be found again (`table_cache`)."""
    from pyspark.sql.types import StructType
    partitions = {c.lower() for c in partition_columns}
    given = StructType([f for f in schema.fields if f.name.lower() not in partitions])
    df = spark.read.schema(given).json(root)
    if len(given.fields) == len(schema.fields):
        return df
    from pyspark.sql import functions as sf
    overlapping = [f.name for f in schema.fields if f.name.lower() in partitions]
    order = [f.name for f in schema.fields] + [c for c in partition_columns
                                               if c.lower() not in {o.lower() for o in overlapping}]
    return df.select(*[sf.col(_quoted(name)) for name in order])


def read_json(spark: Any, root: str, links: dict[str, str], files: dict[str, list[int]], identity: str,
              partition_columns: list[str], cache: SchemaCache | None) -> Any:
    """A DataFrame over the view tree `root` of a JSON table (its objects' links by key in
    `links`), as ``spark.read.json(root)`` gives it, its schema kept in `cache`."""
    if cache is None:
        return spark.read.json(root)
    return read_with(spark, root, table_schema(spark, root, links, files, identity, cache), partition_columns)
