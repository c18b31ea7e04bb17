"""Which delivered objects make up a table, and what each one holds (see `tables` for the whole).

A `Source` says where a table's objects are and how to pick them: `stream_source` for a delivery
stream (the keys its Prefix and the Firehose object name give, minus error output and S3 backup),
`prefix_source` for ``--table NAME=s3://bucket/prefix`` (every object under the prefix).
`find_objects` walks the bucket directory for them, telling each object's kind by its first bytes
(Parquet, ORC, a compression) and the ``k=v`` directories it has in the view tree.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from firehose import layout  # how Firehose lays out what it delivers: its one interface used here

ERROR_DIRECTORIES = layout.ERROR_DIRECTORIES
_KV_SEGMENT = re.compile(r"[^=/]+=[^/]*")
# Characters Spark's partition discovery unescapes from %XX in a directory's value.
_ESCAPED = set('"#%\'*/:=?\\\x7f{[]^')


class ServerUnreachable(RuntimeError):
    """The kinesim server does not answer."""


@dataclass
class Source:
    """Where a table's objects are and how to pick them."""
    name: str                       # the view's name
    location: str                   # s3://bucket/prefix (or a local directory), for people
    bucket_dir: str                 # keys are relative to this directory
    walk_from: str                  # the directory under bucket_dir that holds every candidate
    prefix: str = ""                # keys start with this
    pattern: re.Pattern | None = None     # keys must match this (delivery streams)
    excluded: list[re.Pattern] = field(default_factory=list)   # ... and none of these
    partition_keys: dict[str, str] = field(default_factory=dict)   # regex group -> column name
    format: str | None = None       # parquet | orc, by DataFormatConversionConfiguration
    stream: str | None = None


def table_name(stream: str) -> str:
    """The view name for a delivery stream: `clicks-archive` -> `clicks_archive`."""
    return re.sub(r"[^A-Za-z0-9_]", "_", stream)


# ------------------------------------------------------------------ which keys belong to a table

def _bucket_from_arn(arn: str) -> str:
    return arn.split(":::", 1)[-1]


def _static_dir(prefix: str) -> str:
    """The directory part of a prefix before its first expression: every key is under it."""
    static = prefix.split("!{", 1)[0]
    return static[: static.rfind("/") + 1]


def stream_source(description: dict[str, Any], s3_root: str) -> Source | str:
    """The Source of a delivery stream, or why it has none."""
    name = description["DeliveryStreamName"]
    destinations = description.get("Destinations") or []
    dest = destinations[0].get("ExtendedS3DestinationDescription") if destinations else None
    if not dest:
        return f"{name}: no S3 destination"
    bucket = _bucket_from_arn(dest["BucketARN"])
    bucket_dir = os.path.join(s3_root, bucket)
    if not os.path.isdir(bucket_dir):
        return f"{name}: bucket {bucket} is not in kinesim's object store (an external S3 endpoint?)"
    prefix = dest.get("Prefix") or ""
    data = layout.data_keys(name, prefix)
    excluded = [layout.error_keys(name, prefix, dest.get("ErrorOutputPrefix"))]
    backup = dest.get("S3BackupDescription") if dest.get("S3BackupMode") == "Enabled" else None
    if backup and _bucket_from_arn(backup.get("BucketARN", "")) == bucket:
        excluded.append(layout.data_keys(name, backup.get("Prefix")).regex)
    conversion = dest.get("DataFormatConversionConfiguration") or {}
    fmt = None
    if conversion.get("Enabled"):
        serializer = (conversion.get("OutputFormatConfiguration") or {}).get("Serializer") or {}
        fmt = "orc" if "OrcSerDe" in serializer else "parquet"
    static = _static_dir(prefix)
    return Source(name=table_name(name), location=f"s3://{bucket}/{prefix}", bucket_dir=bucket_dir,
                  walk_from=os.path.join(bucket_dir, static), prefix=static, pattern=data.regex, excluded=excluded,
                  partition_keys=dict(data.partition_keys), format=fmt, stream=name)


def prefix_source(name: str, location: str, s3_root: str | None) -> Source:
    """The Source for `--table NAME=s3://bucket/prefix` (or NAME=/a/local/directory)."""
    match = re.fullmatch(r"s3[an]?://([^/]+)/?(.*)", location)
    if match:
        if s3_root is None:
            raise ServerUnreachable(f"--table {name}={location}: needs a kinesim server to find the bucket on disk")
        bucket, prefix = match.groups()
        bucket_dir = os.path.join(s3_root, bucket)
        if not os.path.isdir(bucket_dir):
            raise LookupError(f"--table {name}={location}: kinesim has no bucket {bucket}")
    else:
        path = location[len("file://"):] if location.startswith("file://") else location
        bucket_dir, prefix = os.path.abspath(path), ""
        if not os.path.isdir(bucket_dir):
            raise LookupError(f"--table {name}={location}: not an s3:// URL nor a directory")
    static = _static_dir(prefix)
    return Source(name=name, location=location, bucket_dir=bucket_dir, walk_from=os.path.join(bucket_dir, static),
                  prefix=prefix)


# ------------------------------------------------------------------ the objects and what they hold

@dataclass
class DeliveredObject:
    path: str
    key: str                          # relative to the bucket directory
    kind: str                         # parquet | orc | gzip | zip | snappy | hadoop-snappy | plain
    partitions: list[str]             # k=v directories of the view tree
    mtime: float
    size: int = 0
    mtime_ns: int = 0


def _sniff(path: str) -> str:
    with open(path, "rb") as f:
        head = f.read(8)
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith(b"ORC"):
        return "orc"
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"PK\x03\x04"):
        return "zip"
    if head.startswith(b"\x28\xb5\x2f\xfd"):
        return "zstd"  # a Kinesis channel's ZSTD objects
    if head.startswith(layout.SNAPPY_MAGIC):
        return "snappy"
    if path.endswith((".snappy", ".hsnappy")):
        return "hadoop-snappy"
    return "plain"


def _escape_value(value: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED or ord(c) < 0x20 else c for c in value)


def _partitions(key: str, match: re.Match | None, groups: dict[str, str]) -> list[str]:
    """The k=v directories of an object in the view tree: its key's own k=v segments, and its
    partition-key values that fill a segment on their own."""
    spans = []
    if match is not None:
        spans = [(match.start(g), match.end(g), column, match.group(g)) for g, column in groups.items()
                 if match.group(g) is not None]
    out, start = [], 0
    for segment in key.split("/")[:-1]:
        end = start + len(segment)
        if _KV_SEGMENT.fullmatch(segment):
            out.append(segment)
        else:
            out += [f"{column}={_escape_value(value)}" for s, e, column, value in spans if start <= s and e <= end]
        start = end + 1
    return out


def find_objects(source: Source) -> list[DeliveredObject]:
    """The objects that make up a table, oldest first."""
    found = []
    if not os.path.isdir(source.walk_from):
        return found
    for directory, subdirs, files in os.walk(source.walk_from):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith((".", "_")))
        for filename in files:
            if filename.startswith((".", "_")):
                continue
            path = os.path.join(directory, filename)
            key = os.path.relpath(path, source.bucket_dir).replace(os.sep, "/")
            if not key.startswith(source.prefix) or ERROR_DIRECTORIES & set(key.split("/")[:-1]):
                continue
            match = None
            if source.pattern is not None:
                match = source.pattern.match(key)
                if match is None or any(p.match(key) for p in source.excluded):
                    continue
            try:
                st = os.stat(path)
                if st.st_size == 0:
                    continue
                kind = _sniff(path)
            except OSError:  # removed meanwhile
                continue
            found.append(DeliveredObject(path, key, kind, _partitions(key, match, source.partition_keys), st.st_mtime,
                                         st.st_size, st.st_mtime_ns))
    found.sort(key=lambda o: (o.mtime, o.key))
    return found
