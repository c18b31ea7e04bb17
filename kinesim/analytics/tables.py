"""Delivery streams as Spark tables: what Firehose delivered, found on disk and registered as views.

``register_tables(spark, endpoint_url=None, *, tables=None, streams=True, cache_dir=None) -> Catalog``

1. Ask the server. ``GET /_kinesim/health`` gives ``s3_root``, the directory that holds the
   buckets (``<s3_root>/<bucket>/<key>``, plain files; a temp directory for ``--in-memory``
   servers); Firehose's ListDeliveryStreams / DescribeDeliveryStream (boto3, against the
   endpoint) give each delivery stream's bucket, Prefix, ErrorOutputPrefix, S3 backup and
   DataFormatConversionConfiguration.
2. Find its objects. A key belongs to a delivery stream when it has the shape Firehose gives it:
   the Prefix (each ``!{...}`` expression one or more path segments; with no expression,
   ``YYYY/MM/dd/HH/`` after it) then ``<stream>-<version>-<YYYY-MM-dd-HH-mm-ss>-<uuid><ext>``.
   Error output (``processing-failed/``, ``format-conversion-failed/``, ... under the
   ErrorOutputPrefix), S3 backup objects and other delivery streams' objects in the same bucket
   are left out.
3. Read them as one table, a temp view named after the stream (``clicks-archive`` ->
   ``clicks_archive``):

   - format: Parquet or ORC when DataFormatConversionConfiguration is enabled (the schema is the
     one in the files: the conversion's columns, batches merged with ``mergeSchema``), else
     the files' first bytes decide (``PAR1``, ``ORC``), else JSON lines with the schema
     inferred by Spark;
   - compression: GZIP (``.gz``) and HADOOP_SNAPPY (``.snappy``, Hadoop's block format) are read
     by Spark itself. ZIP, Snappy (snappy-java's stream format, which Hadoop's SnappyCodec
     cannot read although it shares the ``.snappy`` extension) and gzip under a custom
     FileExtension are decompressed with `firehose.compression.decompress` into a cache
     directory first, and so are objects whose records were written back to back without a
     newline (``{"a":1}{"a":2}``, what Firehose delivers when producers add no delimiter):
     those are rewritten one JSON object per line;
   - partitions: every ``name=value/`` segment of a key (Hive style, e.g. a Prefix
     ``page=!{partitionKeyFromQuery:page}/`` or a literal ``customer=abc/``) becomes a column
     through Spark's partition discovery, and so does each ``!{partitionKeyFromQuery:k}`` /
     ``!{partitionKeyFromLambda:k}`` that fills a segment of its own (``!{...:k}/`` -> column
     ``k``). Other directories (the default ``YYYY/MM/dd/HH/``) are not columns: the files are
     read as if Spark listed them recursively (``recursiveFileLookup``).

   Spark reads a "view tree" per table in a temporary directory: ``<table>/<k=v>/.../<file>``,
   each file a symbolic link to the delivered object (or its decompressed copy). That is how
   exactly one stream's objects are selected, and how dynamic partitions that are not
   ``k=v`` directories become columns.

``tables={"name": "s3://bucket/prefix"}`` (``--table NAME=s3://bucket/prefix``) registers any
prefix of a kinesim bucket (every object under it, minus error-output directories and hidden
``_``/``.`` files; a local directory path works too). A table is a snapshot: objects delivered
after registration are not in it until `register_tables` runs again (`kinesim sql` registers
per command; it keeps JSON tables' schemas between commands, see `json_schemas`). Views of delivery streams
that delivered nothing yet are not created (Spark has no schema for them); `Catalog.empty` names
them.

Kinesis channels' outputs are tables too, named after the channel: `channel_tables.py` says
which keys are a channel's and how its record format is read (JSON, or STRING as text).

Real S3 from a real cluster: this module reads kinesim's files; Spark reads real buckets itself
with the ``s3a://`` file system (see the package docstring).
"""
from __future__ import annotations

import atexit
import gzip
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Iterable

from firehose import compression, keys
from firehose.delivery import S3_FAILED
from kinesim.kinesis import channel_objects

from .channel_tables import channel_source, describe_channels
from .json_schemas import SchemaCache, read_json

log = logging.getLogger("kinesim.analytics")

DEFAULT_ENDPOINT = "http://localhost:4566"
ERROR_DIRECTORIES = frozenset(keys.ERROR_OUTPUT_TYPES) | {S3_FAILED}
_KV_SEGMENT = re.compile(r"[^=/]+=[^/]*")
# `!{namespace:value}`, as firehose.keys parses prefixes.
_EXPRESSION = re.compile(r"!\{([A-Za-z]+):([^{}]*)\}")
_DEFAULT_TIME = r"\d{4}/\d{2}/\d{2}/\d{2}/"
_CODEC_EXTENSIONS = (".gz", ".zip", ".snappy", ".hsnappy")
# Characters Spark's partition discovery unescapes from %XX in a directory's value.
_ESCAPED = set('"#%\'*/:=?\\\x7f{[]^')
_PEEK = 65536


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


@dataclass
class Table:
    """A registered view."""
    name: str
    location: str
    format: str                     # json | parquet | orc
    files: int
    partition_columns: list[str]
    stream: str | None = None
    decompressed: int = 0           # objects read from a decompressed / rewritten copy
    skipped: int = 0                # objects left out (another format than the table's)


@dataclass
class Catalog:
    tables: list[Table] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)     # sources with nothing readable yet
    notes: list[str] = field(default_factory=list)     # what was skipped, and why
    s3_root: str | None = None


def table_name(stream: str) -> str:
    """The view name for a delivery stream: `clicks-archive` -> `clicks_archive`."""
    return re.sub(r"[^A-Za-z0-9_]", "_", stream)


# ------------------------------------------------------------------ asking the server

def server_info(endpoint_url: str) -> dict[str, Any]:
    """The health document, with `s3_root` (older servers: derived from `data_dir`)."""
    url = endpoint_url.rstrip("/") + "/_kinesim/health"
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            info = json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        raise ServerUnreachable(f"cannot reach kinesim at {endpoint_url} ({reason}); is `kinesim serve` running?") \
            from None
    if not info.get("s3_root") and info.get("data_dir"):
        info["s3_root"] = os.path.join(info["data_dir"], "s3")
    return info


def describe_delivery_streams(endpoint_url: str, region: str = "us-east-1") -> list[dict[str, Any]]:
    """DeliveryStreamDescription of every delivery stream, through the Firehose API."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError

    client = boto3.client("firehose", endpoint_url=endpoint_url, region_name=region, aws_access_key_id="kinesim",
                          aws_secret_access_key="kinesim", config=Config(retries={"max_attempts": 2}))
    names: list[str] = []
    kwargs: dict[str, Any] = {"Limit": 10000}
    while True:
        page = client.list_delivery_streams(**kwargs)
        names += page["DeliveryStreamNames"]
        if not page.get("HasMoreDeliveryStreams") or not page["DeliveryStreamNames"]:
            break
        kwargs["ExclusiveStartDeliveryStreamName"] = page["DeliveryStreamNames"][-1]
    out = []
    for name in names:
        try:
            out.append(client.describe_delivery_stream(DeliveryStreamName=name)["DeliveryStreamDescription"])
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") != "ResourceNotFoundException":  # deleted meanwhile
                raise
    return out


# ------------------------------------------------------------------ which keys belong to a table

def _bucket_from_arn(arn: str) -> str:
    return arn.split(":::", 1)[-1]


def _template_regex(template: str, groups: dict[str, str], error_output: bool = False) -> str:
    """A regex for the keys a Firehose prefix template evaluates to (the object name not included).

    Partition-key expressions become named groups (group name -> key name in `groups`).
    """
    found = list(_EXPRESSION.finditer(template))
    if not found:
        # No expression: the text, then (for error output) the error type, then the time.
        types = "(?:" + "|".join(re.escape(t) for t in sorted(ERROR_DIRECTORIES)) + ")/" if error_output else ""
        return re.escape(template) + types + _DEFAULT_TIME
    out, pos = [], 0
    for match in found:
        out.append(re.escape(template[pos:match.start()]))
        namespace, value = match.groups()
        if namespace in keys.PARTITION_NAMESPACES:
            group = f"k{len(groups)}"
            groups[group] = value.strip()
            out.append(f"(?P<{group}>[^/]*)")
        elif namespace == "firehose" and value.strip() == "error-output-type":
            out.append("(?:" + "|".join(re.escape(t) for t in sorted(ERROR_DIRECTORIES)) + ")")
        elif namespace == "timestamp":
            # A pattern such as yyyy/MM/dd spans as many segments as it has slashes.
            out.append("[^/]*" + "/[^/]*" * value.count("/"))
        else:
            out.append("[^/]*")
        pos = match.end()
    out.append(re.escape(template[pos:]))
    return "".join(out)


def _object_name(stream: str) -> str:
    return re.escape(stream) + r"-\d+-\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}-[^/]+"


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
    groups: dict[str, str] = {}
    pattern = re.compile("^" + _template_regex(prefix, groups) + _object_name(name) + "$")
    error_template = keys.error_prefix_template(prefix, dest.get("ErrorOutputPrefix"))
    excluded = [re.compile("^" + _template_regex(error_template, {}, error_output=True) + _object_name(name) + "$")]
    backup = dest.get("S3BackupDescription") if dest.get("S3BackupMode") == "Enabled" else None
    if backup and _bucket_from_arn(backup.get("BucketARN", "")) == bucket:
        excluded.append(re.compile("^" + _template_regex(backup.get("Prefix") or "", {}) + _object_name(name) + "$"))
    conversion = dest.get("DataFormatConversionConfiguration") or {}
    fmt = None
    if conversion.get("Enabled"):
        serializer = (conversion.get("OutputFormatConfiguration") or {}).get("Serializer") or {}
        fmt = "orc" if "OrcSerDe" in serializer else "parquet"
    static = _static_dir(prefix)
    return Source(name=table_name(name), location=f"s3://{bucket}/{prefix}", bucket_dir=bucket_dir,
                  walk_from=os.path.join(bucket_dir, static), prefix=static, pattern=pattern, excluded=excluded,
                  partition_keys=groups, format=fmt, stream=name)


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
    if head.startswith(compression.XERIAL_MAGIC):
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


def _family(kind: str) -> str:
    return kind if kind in ("parquet", "orc") else "json"


def _back_to_back(head: bytes) -> bool:
    """Whether the first JSON value of `head` is followed by another on the same line (records
    written with no delimiter). A first value longer than `head` cannot be judged: no."""
    text = head.decode("utf-8", "ignore").lstrip()
    try:
        _, end = json.JSONDecoder().raw_decode(text)
    except ValueError:
        return False
    rest = text[end:].lstrip(" \t\r")
    return bool(rest) and not rest.startswith("\n")


def _peek_records(path: str, kind: str) -> bytes:
    """The first bytes of an object's records (at most one snappy block's worth)."""
    if kind == "gzip":
        with gzip.open(path, "rb") as f:
            return f.read(_PEEK)
    with open(path, "rb") as f:
        head = f.read(_PEEK)
    if kind == "hadoop-snappy" and len(head) >= 8:
        # The first block: uncompressed length, compressed length, the raw snappy bytes.
        length = int.from_bytes(head[4:8], "big")
        return compression.decompress(head[: 8 + length], "HADOOP_SNAPPY")
    return head


def _json_lines(data: bytes) -> bytes:
    """Records as one JSON value per line (values written back to back are split)."""
    text = data.decode("utf-8", "replace")
    decoder, out, pos = json.JSONDecoder(), [], 0
    while pos < len(text):
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        try:
            value, end = decoder.raw_decode(text, pos)
        except ValueError:
            # Not JSON from here on: keep the rest as lines (Spark reports them as corrupt records).
            out += [line for line in text[pos:].splitlines() if line.strip()]
            break
        out.append(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
        pos = end
    return ("\n".join(out) + "\n").encode() if out else b""


def _needs_copy(obj: DeliveredObject) -> bool:
    """Whether Spark cannot read the object's JSON as it is."""
    name = os.path.basename(obj.path)
    if obj.kind in ("zip", "snappy", "zstd"):
        return True
    if obj.kind == "gzip" and not name.endswith(".gz"):
        return True  # a custom FileExtension: Spark picks codecs by extension
    if obj.kind == "hadoop-snappy" and not name.endswith(".snappy"):
        return True
    if obj.kind == "plain" and name.endswith(_CODEC_EXTENSIONS):
        return True  # Spark would take the extension for a codec
    try:
        return _back_to_back(_peek_records(obj.path, obj.kind))
    except (OSError, EOFError, ValueError):
        return False  # unreadable: Spark will say so


_FORMAT_OF_KIND = {"gzip": "GZIP", "zip": "ZIP", "snappy": "Snappy", "hadoop-snappy": "HADOOP_SNAPPY", "plain": None}


def _json_copy(obj: DeliveredObject, cache_dir: str, family: str = "json") -> str:
    """The object's records as plain JSON lines (lines of text for the text family) in the
    cache (made once per object version)."""
    st = os.stat(obj.path)
    digest = hashlib.sha1(f"{obj.path}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()[:20]
    copy = os.path.join(cache_dir, f"{digest}.json")
    if not os.path.exists(copy):
        with open(obj.path, "rb") as f:
            raw = f.read()
        data = channel_objects.decompress(raw, "ZSTD") if obj.kind == "zstd" else \
            compression.decompress(raw, _FORMAT_OF_KIND[obj.kind])
        tmp = f"{copy}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data if family == "text" else _json_lines(data))
        os.replace(tmp, copy)
    return copy


def _tree_name(obj: DeliveredObject, copied: bool) -> str:
    name = os.path.basename(obj.path)
    if copied:
        for ext in _CODEC_EXTENSIONS:
            if name.endswith(ext):
                name = name[: -len(ext)]
        name += ".json"
    # Spark skips files whose names start with "_" or "." (a stream may be called "_x").
    return "f" + name if name.startswith(("_", ".")) else name


def build_view_tree(table: str, objects: Iterable[DeliveredObject], tree_root: str, cache_dir: str,
                    family: str) -> tuple[str, int, dict[str, str]]:
    """The directory Spark reads for a table: k=v directories holding links to the objects (or to
    their decompressed copies). Returns it, how many objects were copied, and the links by key."""
    root = os.path.join(tree_root, table)
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    copied = 0
    taken: dict[str, str] = {}
    for obj in objects:
        target, copy = obj.path, family in ("json", "text") and _needs_copy(obj)
        if copy:
            target = _json_copy(obj, cache_dir, family)
            copied += 1
        directory = os.path.join(root, *obj.partitions)
        name = _tree_name(obj, copy)
        link = os.path.join(directory, name)
        n = 1
        while link in taken:  # two objects of one name in different directories
            link = os.path.join(directory, f"{n}-{name}")
            n += 1
        taken[link] = obj.key
        os.makedirs(directory, exist_ok=True)
        os.symlink(target, link)
    return root, copied, {key: link for link, key in taken.items()}


# ------------------------------------------------------------------ registration

def _temp_dir() -> str:
    path = tempfile.mkdtemp(prefix="kinesim-sql-")
    atexit.register(shutil.rmtree, path, True)
    return path


def _read(spark: Any, path: str, family: str):
    reader = spark.read
    if family in ("parquet", "orc"):
        # Each delivered batch may carry its own inferred schema: merge them.
        return reader.option("mergeSchema", "true").format(family).load(path)
    return reader.text(path)  # a STRING channel: one row per record, column `value`


def register_source(spark: Any, source: Source, tree_root: str, cache_dir: str, catalog: Catalog,
                    schemas: SchemaCache | None = None) -> Table | None:
    """Register one source as a temp view (None, noted in `catalog`, when it has nothing to read);
    a JSON table's schema is kept in `schemas` (see `json_schemas`)."""
    objects = find_objects(source)
    if not objects:
        catalog.empty.append(source.name)
        return None
    family = source.format or _family(objects[-1].kind)
    chosen = [o for o in objects if _family(o.kind) == ("json" if family == "text" else family)]
    skipped = len(objects) - len(chosen)
    if skipped:
        catalog.notes.append(f"{source.name}: {skipped} of {len(objects)} objects are not {family} "
                             f"(written before the format changed?); left out")
    if not chosen:
        catalog.empty.append(source.name)
        return None
    layouts = {tuple(p.split("=", 1)[0] for p in o.partitions) for o in chosen}
    if len(layouts) > 1:
        # Spark's partition discovery needs one directory layout (a Prefix changed by UpdateDestination?).
        catalog.notes.append(f"{source.name}: objects have different partition directories "
                             f"({' / '.join(sorted('/'.join(l) or '(none)' for l in layouts))}); read without "
                             "partition columns")
        for o in chosen:
            o.partitions = []
    root, copied, links = build_view_tree(source.name, chosen, tree_root, cache_dir, family)
    partition_columns = [p.split("=", 1)[0] for p in chosen[0].partitions]
    try:
        if family == "json":
            identity = json.dumps([source.name, source.location, source.pattern and source.pattern.pattern])
            df = read_json(spark, root, links, {o.key: [o.size, o.mtime_ns] for o in chosen}, identity,
                           partition_columns, schemas)
        else:
            df = _read(spark, root, family)
        df.createOrReplaceTempView(source.name)
    except Exception as err:  # one unreadable table must not take the others with it
        message = (err.getMessage() if hasattr(err, "getMessage") else str(err)).strip() or type(err).__name__
        catalog.notes.append(f"{source.name}: Spark cannot read {source.location}: {message.splitlines()[0]}")
        return None
    return Table(source.name, source.location, family, len(chosen), partition_columns, source.stream, copied,
                 skipped)


def plan_tables(endpoint_url: str | None = None, *, tables: dict[str, str] | None = None,
                streams: bool = True) -> tuple[list[Source], Catalog]:
    """What to register, without Spark: each delivery stream's Source (when `streams`) and one per
    `tables` entry (name -> s3://bucket/prefix or a local directory). Asks the server only when
    something needs it (ServerUnreachable if it does not answer)."""
    endpoint_url = endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or DEFAULT_ENDPOINT
    catalog = Catalog()
    needs_server = streams or any(re.match(r"s3[an]?://", url) for url in (tables or {}).values())
    info: dict[str, Any] = {}
    if needs_server:
        info = server_info(endpoint_url)
        catalog.s3_root = info.get("s3_root")
        if not catalog.s3_root:
            raise ServerUnreachable(f"kinesim at {endpoint_url} does not say where its buckets are (no s3_root)")
    sources: list[Source] = []
    if streams:
        for description in describe_delivery_streams(endpoint_url, info.get("region") or "us-east-1"):
            source = stream_source(description, catalog.s3_root)
            if isinstance(source, str):
                catalog.notes.append(source)
            else:
                sources.append(source)
        # Kinesis channels' outputs too, each a table named after its channel.
        for description in describe_channels(endpoint_url, info.get("region") or "us-east-1"):
            source = channel_source(description, catalog.s3_root, Source, table_name)
            if isinstance(source, str):
                catalog.notes.append(source)
            else:
                sources.append(source)
    for name, location in (tables or {}).items():
        sources = [s for s in sources if s.name != name]  # an explicit table wins over a stream's
        sources.append(prefix_source(name, location, catalog.s3_root))
    return sources, catalog


def register_sources(spark: Any, sources: list[Source], catalog: Catalog, cache_dir: str | None = None,
                     tree_root: str | None = None, schemas: SchemaCache | None = None) -> Catalog:
    """Register planned sources as temp views of `spark`, recording them in `catalog`. The views
    read a tree of links under `tree_root` (default: a temporary directory removed when this
    process exits; a continuous query, which outlives it, gives its own). JSON tables' schemas
    are kept in `schemas` between calls (none: Spark infers them every time)."""
    if tree_root:
        shutil.rmtree(tree_root, ignore_errors=True)
        os.makedirs(tree_root)
    else:
        tree_root = _temp_dir()
    cache_dir = cache_dir or os.path.join(tree_root, ".decompressed")
    os.makedirs(cache_dir, exist_ok=True)
    for source in sources:
        table = register_source(spark, source, tree_root, cache_dir, catalog, schemas)
        if table is not None:
            catalog.tables.append(table)
    return catalog


def register_tables(spark: Any, endpoint_url: str | None = None, *, tables: dict[str, str] | None = None,
                    streams: bool = True, cache_dir: str | None = None) -> Catalog:
    """Register every delivery stream's output (and `tables`: name -> s3://bucket/prefix) as temp
    views of `spark`; see the module docstring. Notes on what was left out are logged too."""
    sources, catalog = plan_tables(endpoint_url, tables=tables, streams=streams)
    register_sources(spark, sources, catalog, cache_dir)
    for note in catalog.notes:
        log.warning("%s", note)
    return catalog
