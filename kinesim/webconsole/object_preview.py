"""Previews of objects for the console's bucket page, bounded whatever the object holds.

A preview reads at most TEXT_LIMIT bytes of text (64 KiB) and shows at most ROW_LIMIT rows:

* JSON (one document, JSON lines, or documents written back to back as Firehose writes records
  without a delimiter): the values, as a table when they are objects; else plain text;
* gzip (by its magic bytes, whatever the key says): inflated only up to TEXT_LIMIT, reading at most
  GZIP_READ_LIMIT compressed bytes, so a gzip bomb of any ratio costs that much and no more;
* Parquet and ORC (pyarrow, imported only here and only when one is previewed): schema, row count
  and the first rows, read from the footer and the first row group, refused past TABLE_LIMIT;
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
import math
import zlib
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any, BinaryIO

TEXT_LIMIT = 64 << 10
ROW_LIMIT = 50
HEX_LIMIT = 1024
GZIP_READ_LIMIT = 8 << 20        # compressed bytes read for a gzip preview
TABLE_LIMIT = 32 << 20           # a Parquet footer or first row group, an ORC object, read for a preview
MAX_DEPTH = 32                   # deeper JSON is shown as text
MAX_COLUMNS = 40
CELL_BYTES = 256                 # of a binary value shown in hex
GZIP_MAGIC = b"\x1f\x8b"


class NotPlain(Exception):
    """A value the preview shows as text rather than as values (too deep)."""


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


def plain(value: Any, depth: int = 0) -> Any:
    """A value as JSON can carry it to the page: bytes as text or hex, times as ISO strings, integers
    past 64 bits and non-finite floats as strings; NotPlain if nested deeper than MAX_DEPTH."""
    if depth > MAX_DEPTH:
        raise NotPlain()
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value if -(1 << 63) <= value < (1 << 64) else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v, depth + 1) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return _binary_value(bytes(value))
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return str(value)


def _binary_value(data: bytes) -> str:
    """A binary column's value: its text when it is printable UTF-8, else 0x and its hex."""
    try:
        text = data.decode("utf-8")
        if text.isprintable():
            return text
    except UnicodeDecodeError:
        pass
    return "0x" + data[:CELL_BYTES].hex() + ("…" if len(data) > CELL_BYTES else "")


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
    try:
        if fmt == "parquet":
            found = _parquet(f, size)
        elif size > TABLE_LIMIT:
            found = {"note": f"an ORC object over {TABLE_LIMIT >> 20} MiB is not read for a preview"}
        else:
            found = _orc(f)
    except Exception as err:  # pyarrow's errors (ArrowInvalid, OSError...) for a damaged file
        f.seek(0)
        return _binary(f.read(HEX_LIMIT), size > HEX_LIMIT, None, f"not a readable {fmt} file: {err}")
    if "rows" not in found:
        f.seek(0)
        return {**_binary(f.read(HEX_LIMIT), size > HEX_LIMIT, None, found["note"]), "format": fmt}
    found.setdefault("truncated", found["total_rows"] > len(found["rows"]))
    return {"kind": "table", "format": fmt, "compression": None, **found}


def _columns(schema: Any) -> list[dict[str, str]]:
    return [{"name": field.name, "type": str(field.type)} for field in schema]


def _rows(batch: Any) -> list[list[Any]]:
    """A record batch's first ROW_LIMIT rows, values as JSON carries them (first MAX_COLUMNS)."""
    batch = batch.slice(0, ROW_LIMIT)
    columns = [batch.column(i).to_pylist() for i in range(min(batch.num_columns, MAX_COLUMNS))]
    try:
        return [[plain(c[i]) for c in columns] for i in range(batch.num_rows)]
    except NotPlain:
        return [[str(c[i]) for c in columns] for i in range(batch.num_rows)]


def _parquet(f: BinaryIO, size: int) -> dict[str, Any]:
    import pyarrow.parquet as pq
    # The footer's length is in the last 8 bytes ("<length>PAR1"): a huge one is not read.
    f.seek(max(0, size - 8))
    tail = f.read(8)
    footer = int.from_bytes(tail[:4], "little") if len(tail) == 8 and tail[4:] == b"PAR1" else None
    if footer is None or footer > TABLE_LIMIT:
        return {"note": "a Parquet file without a readable footer" if footer is None
                else f"a Parquet footer of {footer:,} bytes is not read for a preview"}
    f.seek(0)
    parquet = pq.ParquetFile(f)
    meta = parquet.metadata
    doc = {"columns": _columns(parquet.schema_arrow)[:MAX_COLUMNS], "total_rows": meta.num_rows,
           "row_groups": meta.num_row_groups, "rows": []}
    if meta.num_row_groups and meta.num_rows:
        group = meta.row_group(0)
        if group.total_byte_size > TABLE_LIMIT:
            return {**doc, "rows": [], "truncated": True,
                    "note": f"the first row group holds {group.total_byte_size:,} bytes: not read for a preview"}
        batch = next(parquet.iter_batches(batch_size=ROW_LIMIT, row_groups=[0]), None)
        if batch is not None:
            doc["rows"] = _rows(batch)
    return doc


def _orc(f: BinaryIO) -> dict[str, Any]:
    import pyarrow.orc as orc
    found = orc.ORCFile(f)
    doc = {"columns": _columns(found.schema)[:MAX_COLUMNS], "total_rows": found.nrows,
           "stripes": found.nstripes, "rows": []}
    if found.nstripes and found.nrows:
        doc["rows"] = _rows(found.read_stripe(0))
    return doc
