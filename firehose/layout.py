"""How Firehose lays out what it delivers, for those who read a bucket afterwards (kinesim's Spark
tables, kinesim/analytics/table_sources.py): the keys a delivery stream's objects get, data apart
from error output and S3 backup, the partition keys a key holds, and how an object's bytes are
compressed. This is the one part of Firehose that readers use: how Firehose names and writes
objects (`keys`, `compression`, `delivery`) may change behind it.

- `ERROR_DIRECTORIES`: the directory names error output goes under (AWS's error-output-types,
  and kinesim's ``s3-failed`` for records S3 never accepted).
- `data_keys(stream, prefix) -> KeyPattern`: the keys of a delivery stream's objects under a
  destination's (or an S3 backup's) Prefix, with the regex groups that hold partition-key values.
- `error_keys(stream, prefix, error_prefix) -> re.Pattern`: the keys of its error output.
- `SNAPPY_MAGIC`: the first bytes of a "Snappy" object (snappy-java's framing; HADOOP_SNAPPY
  objects have none); `decompress(data, compression)` undoes a CompressionFormat (``GZIP``,
  ``ZIP``, ``Snappy``, ``HADOOP_SNAPPY``; None or ``UNCOMPRESSED``: as is).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import compression, keys

ERROR_DIRECTORIES = frozenset(keys.ERROR_OUTPUT_TYPES) | {keys.S3_FAILED}
SNAPPY_MAGIC = compression.XERIAL_MAGIC
decompress = compression.decompress

# `!{namespace:value}`, as keys.py parses prefixes.
_EXPRESSION = re.compile(r"!\{([A-Za-z]+):([^{}]*)\}")
# The time keys.py appends to a prefix without expressions: YYYY/MM/dd/HH/.
_DEFAULT_TIME = r"\d{4}/\d{2}/\d{2}/\d{2}/"


@dataclass(frozen=True)
class KeyPattern:
    """The keys of a delivery stream's objects under one prefix."""
    regex: re.Pattern
    partition_keys: dict[str, str] = field(default_factory=dict)   # regex group -> partition key name


def data_keys(stream: str, prefix: str | None) -> KeyPattern:
    """The keys of `stream`'s objects written under `prefix` (a destination's or an S3 backup's)."""
    groups: dict[str, str] = {}
    regex = re.compile("^" + _template_regex(prefix or "", groups) + _object_name(stream) + "$")
    return KeyPattern(regex, groups)


def error_keys(stream: str, prefix: str | None, error_prefix: str | None) -> re.Pattern:
    """The keys of `stream`'s error output, for a destination's Prefix and ErrorOutputPrefix."""
    template = keys.error_prefix_template(prefix, error_prefix)
    return re.compile("^" + _template_regex(template, {}, error_output=True) + _object_name(stream) + "$")


def _template_regex(template: str, groups: dict[str, str], error_output: bool = False) -> str:
    """A regex for the keys a prefix template evaluates to (the object name not included).
    Partition-key expressions become named groups (group name -> key name in `groups`)."""
    found = list(_EXPRESSION.finditer(template))
    error_types = "(?:" + "|".join(re.escape(t) for t in sorted(ERROR_DIRECTORIES)) + ")"
    if not found:
        # No expression: the text, then (for error output) the error type, then the time.
        return re.escape(template) + (error_types + "/" if error_output else "") + _DEFAULT_TIME
    out, pos = [], 0
    for match in found:
        out.append(re.escape(template[pos:match.start()]))
        namespace, value = match.groups()
        if namespace in keys.PARTITION_NAMESPACES:
            group = f"k{len(groups)}"
            groups[group] = value.strip()
            out.append(f"(?P<{group}>[^/]*)")
        elif namespace == "firehose" and value.strip() == "error-output-type":
            out.append(error_types)
        elif namespace == "timestamp":
            # A pattern such as yyyy/MM/dd spans as many segments as it has slashes.
            out.append("[^/]*" + "/[^/]*" * value.count("/"))
        else:
            out.append("[^/]*")
        pos = match.end()
    out.append(re.escape(template[pos:]))
    return "".join(out)


def _object_name(stream: str) -> str:
    """Firehose's object name: <stream>-<version>-YYYY-MM-DD-HH-MM-SS-<uuid><extension>."""
    return re.escape(stream) + r"-\d+-\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}-[^/]+"
