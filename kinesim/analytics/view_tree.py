"""The directory Spark reads for a table (its "view tree", see `tables`): ``<table>/<k=v>/.../<file>``,
each file a symbolic link to a delivered object, or to a copy of its records as plain JSON lines
when Spark cannot read the object as it is (a compression Spark does not know by the object's
extension, records written back to back with no newline).
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
from typing import Iterable

from firehose import layout
from kinesim.kinesis import channel_objects

from .table_sources import DeliveredObject

_CODEC_EXTENSIONS = (".gz", ".zip", ".snappy", ".hsnappy")
_PEEK = 65536


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
        return layout.decompress(head[: 8 + length], "HADOOP_SNAPPY")
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
            layout.decompress(raw, _FORMAT_OF_KIND[obj.kind])
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
