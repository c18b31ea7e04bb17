"""The first rows of a Parquet or ORC object, read in a child process under limits.

Run as `python -I -m kinesim.previews.tables FORMAT MEMORY_BYTES CPU_SECONDS` with the object's
file as stdin (`table_child` does); writes one JSON document to stdout:

    {"columns": [{"name", "type"}], "total_rows", "row_groups" | "stripes", "rows": [[...]]}
    {"error": message, "over_limit": bool}     a file pyarrow cannot read, or not within the limits

Only what ROW_LIMIT rows of MAX_COLUMNS columns need is decoded: Parquet through
`ParquetFile.iter_batches` (column chunks read through a small buffer, not whole), ORC through a
dataset scanner with that batch size (`ORCFile.read_stripe` decodes a whole stripe: ten million rows
of eight columns, 22 KB on disk, took 640 MB). Even so one row can be huge (a 366-byte ORC file
holds a list of ten million items, a 500 KB one a string of 200 MB), and pyarrow cannot be told to
stop at a size; so the limits are the process's own (address space, CPU time), set before pyarrow
is imported, and cells go out cut by `values.cell`.
"""
from __future__ import annotations

import json
import os
import resource
import sys
from typing import Any, BinaryIO

from .values import MAX_COLUMNS, ROW_LIMIT, cell

READ_BUFFER = 1 << 20  # Parquet: a column chunk is read through this buffer, page by page
# What must outlive the answer: a dataset scanner destroyed before its end reads every batch left
# (10 million rows in batches of 50: 13 s of CPU), so the child answers, then leaves with os._exit.
_KEEP: list[Any] = []


def main(argv: list[str]) -> None:
    fmt, memory, cpu = argv[1], int(argv[2]), int(argv[3])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU ends the process, else SIGKILL a second on
    source = os.fdopen(0, "rb", closefd=False)
    try:
        doc = parquet(source) if fmt == "parquet" else orc(source)
    except Exception as err:  # pyarrow's errors (ArrowInvalid, OSError...), MemoryError past the limit
        # liborc reports a failed allocation as an ArrowException naming std::bad_alloc.
        over = isinstance(err, MemoryError) or "bad_alloc" in str(err)
        doc = {"error": str(err) or type(err).__name__, "over_limit": over}
    sys.stdout.write(json.dumps(doc))
    sys.stdout.flush()
    os._exit(0)  # nothing to tear down (see _KEEP)


def parquet(source: BinaryIO) -> dict[str, Any]:
    import pyarrow.parquet as pq
    found = pq.ParquetFile(source, buffer_size=READ_BUFFER)
    meta = found.metadata
    doc = {"columns": _columns(found.schema_arrow), "total_rows": meta.num_rows,
           "row_groups": meta.num_row_groups, "rows": []}
    batches = found.iter_batches(batch_size=ROW_LIMIT, columns=_shown_names(found.schema_arrow), use_threads=False)
    doc["rows"] = _rows(next(batches, None))
    return doc


def orc(source: BinaryIO) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.orc as pa_orc
    file = pa.PythonFile(source, mode="r")
    found = pa_orc.ORCFile(file)  # the file's tail only: schema, row and stripe counts
    doc = {"columns": _columns(found.schema), "total_rows": found.nrows, "stripes": found.nstripes, "rows": []}
    if found.nrows:
        fragment = ds.OrcFileFormat().make_fragment(file)
        scanner = ds.Scanner.from_fragment(fragment, columns=_shown_names(found.schema), batch_size=ROW_LIMIT,
                                           batch_readahead=1, use_threads=False)
        batches = iter(scanner.to_batches())
        _KEEP.append(batches)
        doc["rows"] = _rows(next(batches, None))
    return doc


def _columns(schema: Any) -> list[dict[str, str]]:
    return [{"name": field.name, "type": str(field.type)} for field in schema][:MAX_COLUMNS]


def _shown_names(schema: Any) -> list[str] | None:
    """The columns to decode: the first MAX_COLUMNS (None: all, which also reads a file whose
    column names repeat)."""
    return schema.names[:MAX_COLUMNS] if len(schema.names) > MAX_COLUMNS else None


def _rows(batch: Any) -> list[list[Any]]:
    """A record batch's first ROW_LIMIT rows, each cell cut by `values.cell`."""
    if batch is None:
        return []
    batch = batch.slice(0, ROW_LIMIT)
    columns = [batch.column(i).to_pylist() for i in range(min(batch.num_columns, MAX_COLUMNS))]
    return [[cell(c[i]) for c in columns] for i in range(batch.num_rows)]


if __name__ == "__main__":
    main(sys.argv)
