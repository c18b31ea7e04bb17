"""Previews of objects for the console's bucket page, bounded whatever the object holds.

A preview reads at most TEXT_LIMIT bytes of text (64 KiB) and shows at most ROW_LIMIT rows:

* JSON (one document, JSON lines, or documents written back to back as Firehose writes records
  without a delimiter): the values, as a table when they are objects; else plain text;
* gzip (by its magic bytes, whatever the key says): inflated only up to TEXT_LIMIT, reading at most
  GZIP_READ_LIMIT compressed bytes, so a gzip bomb of any ratio costs that much and no more;
* Parquet and ORC: schema, row count and the first rows, decoded ROW_LIMIT rows at a time in a
  child process under a memory and CPU limit (`kinesim.previews.tables`), each cell cut to
  `previews.values.CELL_CHARS`: what such a file declares is not bounded by its size (22 KB of ORC held ten million
  rows, which a stripe read decoded into 640 MB; 366 bytes, a list of ten million items), so
  nothing of it is decoded in the server, and a file the child cannot read within its limits is
  shown as bytes with a note saying so;
* anything else: a hex dump of the first HEX_LIMIT bytes.

The answer: {"kind": "empty" | "json" | "text" | "table" | "binary", "format": what the bytes are
("json", "text", "parquet", "orc", "binary"), "compression": "gzip" or null, "truncated": bool,
"text": str (json, text), "records": [...] (json), "columns": [{"name", "type"}] and "rows":
[[...]] (table, json objects), "total_rows" (table), "hex": [lines] (binary), "note": why a
preview is partial}.
"""
from __future__ import annotations

import codecs
import json
import zlib
from typing import Any, BinaryIO

from ..previews.table_child import read_table
from ..previews.values import MAX_COLUMNS, ROW_LIMIT, NotPlain, plain

TEXT_LIMIT = 64 << 10
HEX_LIMIT = 1024
GZIP_READ_LIMIT = 8 << 20        # compressed bytes read for a gzip preview
GZIP_MAGIC = b"\x1f\x8b"


def preview(f: BinaryIO, size: int) -> dict[str, Any]:
    """The preview of an object's bytes, `f` open at its start (`size` bytes long)."""
    if size == 0:
        return {"kind": "empty", "format": "empty", "compression": None, "truncated": False}
    head = f.read(4)
    f.seek(0)
    if head == b"PAR1":
        return _table(f, size, "parquet")
    if head[:3] == b"ORC":
        return _table(f, size, "orc")
    if head[:2] == GZIP_MAGIC:
        try:
            data, truncated = gunzip(f)
        except (zlib.error, EOFError) as err:
            f.seek(0)
            return _binary(f.read(HEX_LIMIT), size > HEX_LIMIT, "gzip", f"not a gzip stream that inflates: {err}")
        return _bytes(data, truncated, "gzip")
    data = f.read(TEXT_LIMIT + 1)
    return _bytes(data[:TEXT_LIMIT], len(data) > TEXT_LIMIT, None)


def gunzip(f: BinaryIO) -> tuple[bytes, bool]:
    """The first TEXT_LIMIT bytes a gzip stream (of one or more members) inflates to, and whether
    there was more (or more than GZIP_READ_LIMIT compressed bytes to read to know)."""
    want = TEXT_LIMIT + 1
    out = bytearray()
    inflate = zlib.decompressobj(31)
    pending, taken = b"", 0
    while len(out) < want:
        if not pending:
            if taken >= GZIP_READ_LIMIT:
                return bytes(out), True
            pending = f.read(min(1 << 16, GZIP_READ_LIMIT - taken))
            taken += len(pending)
            if not pending:
                break
        out += inflate.decompress(pending, want - len(out))
        pending = inflate.unconsumed_tail
        if inflate.eof:  # a member ended: another may follow (concatenated gzip files)
            pending = inflate.unused_data
            if not pending:
                pending = f.read(2)
                taken += len(pending)
            if pending[:2] != GZIP_MAGIC:
                break
            inflate = zlib.decompressobj(31)
    return bytes(out[:TEXT_LIMIT]), len(out) > TEXT_LIMIT


def _bytes(data: bytes, truncated: bool, compression: str | None) -> dict[str, Any]:
    """Text (and JSON in it), else binary."""
    text = _text(data, truncated)
    if text is None:
        return _binary(data[:HEX_LIMIT], truncated or len(data) > HEX_LIMIT, compression)
    doc = {"kind": "text", "format": "text", "compression": compression, "truncated": truncated, "text": text}
    records = json_values(text, truncated)
    if records is not None:
        doc.update(kind="json", format="json", records=records)
        if all(isinstance(r, dict) for r in records):
            names = list(dict.fromkeys(k for r in records for k in r))[:MAX_COLUMNS]
            doc.update(columns=[{"name": n, "type": None} for n in names],
                       rows=[[r.get(n) for n in names] for r in records])
    return doc


def _text(data: bytes, truncated: bool) -> str | None:
    """`data` as text, None if it is not UTF-8 text (a character cut by the limit is left out)."""
    if b"\x00" in data:
        return None
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(data, final=not truncated)
    except UnicodeDecodeError:
        return None


def json_values(text: str, truncated: bool) -> list[Any] | None:
    """The first ROW_LIMIT JSON values of `text` (whitespace, newlines or nothing between them);
    None unless all of it is JSON (a value cut by the limit at the end is left out)."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    pos, end = 0, len(text)
    while len(values) < ROW_LIMIT:
        while pos < end and text[pos] in " \t\r\n":
            pos += 1
        if pos >= end:
            break
        try:
            value, pos = decoder.raw_decode(text, pos)
            values.append(plain(value))
        except (ValueError, RecursionError, NotPlain):
            if truncated and values:
                break
            return None
    return values or None


def _binary(data: bytes, truncated: bool, compression: str | None, note: str | None = None) -> dict[str, Any]:
    return {"kind": "binary", "format": "binary", "compression": compression, "truncated": truncated,
            "hex": hex_dump(data), **({"note": note} if note else {})}


def hex_dump(data: bytes) -> list[str]:
    """Lines as `xxd` prints them: offset, 16 bytes in hex, the printable ones as text."""
    lines = []
    for offset in range(0, len(data), 16):
        chunk = data[offset:offset + 16]
        hexed = " ".join(chunk[i:i + 2].hex() for i in range(0, len(chunk), 2))
        shown = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{offset:08x}: {hexed:<39}  {shown}")
    return lines


# ------------------------------------------------------------------ Parquet and ORC

def _table(f: BinaryIO, size: int, fmt: str) -> dict[str, Any]:
    """Schema, row count and first rows, decoded in a child process under limits (`previews.tables`)."""
    found = read_table(f, fmt)
    if "error" in found:
        f.seek(0)
        note = (f"not previewed: {found['error']}" if found.get("over_limit")
                else f"not a readable {fmt} file: {found['error']}")
        return {**_binary(f.read(HEX_LIMIT), size > HEX_LIMIT, None, note), "format": fmt}
    found.setdefault("truncated", found["total_rows"] > len(found["rows"]))
    return {"kind": "table", "format": fmt, "compression": None, **found}
