"""Results and errors as `kinesim sql` and `kinesim queries` show them: values as Spark's show()
writes them, tables, CSV, JSON lines, result files, and Spark's errors without a stack trace."""
from __future__ import annotations

import base64
import csv
import datetime as dt
import decimal
import json
import math
import os
from typing import IO, Any


def cell(value: Any) -> str:
    """A value as Spark's show() writes it (NULL, true, [a, b], {a, b}, {k -> v})."""
    from pyspark.sql import Row
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Row):
        return "{" + ", ".join(cell(v) for v in value) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{cell(k)} -> {cell(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(cell(v) for v in value) + "]"
    if isinstance(value, (bytes, bytearray)):
        return "[" + " ".join(f"{b:02X}" for b in value) + "]"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    return str(value)


def jsonable(value: Any) -> Any:
    """A value for json.dumps, as Spark's JSON writer gives it (binary as base64, times as ISO text)."""
    from pyspark.sql import Row
    if isinstance(value, Row):
        return {k: jsonable(v) for k, v in zip(value.__fields__, value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    if isinstance(value, dt.timedelta):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        # Not JSON numbers: Spark's JSON writer gives them as text too.
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    return value


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    converted = jsonable(value)
    return json.dumps(converted, ensure_ascii=False) if isinstance(converted, (dict, list)) else converted


def ascii_table(columns: list[str], rows: list[list[str]], numeric: list[bool]) -> str:
    """Rows under a header in a box of +, - and |, nothing truncated; numbers right-aligned."""
    rows = [[c.replace("\n", "\\n") for c in row] for row in rows]
    widths = [max([len(name)] + [len(row[i]) for row in rows]) for i, name in enumerate(columns)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(values: list[str], header: bool = False) -> str:
        cells = (v.rjust(w) if numeric[i] and not header else v.ljust(w)
                 for i, (v, w) in enumerate(zip(values, widths)))
        return "|" + "|".join(f" {c} " for c in cells) + "|"
    return "\n".join([rule, line(columns, True), rule, *(line(r) for r in rows), rule]) + "\n"


def numeric_columns(df: Any) -> list[bool]:
    from pyspark.sql.types import NumericType
    return [isinstance(f.dataType, NumericType) for f in df.schema.fields]


def print_result(df: Any, fmt: str, out: IO[str]) -> int:
    """Print a DataFrame's rows; returns how many."""
    columns = df.columns
    if not columns:
        return 0  # a command (CREATE VIEW, SET x=y ...) with nothing to show
    if fmt == "table":
        rows = df.collect()
        out.write(ascii_table(columns, [[cell(v) for v in row] for row in rows], numeric_columns(df)))
        return len(rows)
    count = 0
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for count, row in enumerate(df.toLocalIterator(), 1):
            writer.writerow([_csv_cell(v) for v in row])
    else:
        for count, row in enumerate(df.toLocalIterator(), 1):
            out.write(json.dumps({k: jsonable(v) for k, v in zip(columns, row)}, ensure_ascii=False) + "\n")
    out.flush()
    return count


def output_format(path: str, given: str | None) -> str:
    if given:
        return given
    ext = os.path.splitext(path)[1].lower()
    found = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json"}.get(ext)
    if found is None:
        raise ValueError(f"--output {path}: say the format with --output-format (parquet, csv or json) or use "
                         ".parquet, .csv or .json")
    return found


def write_result(df: Any, path: str, fmt: str) -> int:
    """Write a result as one file (Parquet through Arrow, CSV, or JSON lines); returns the row count."""
    tmp = f"{path}.tmp-{os.getpid()}"
    if fmt == "parquet":
        import pyarrow.parquet as pq
        table = df.toArrow()
        pq.write_table(table, tmp)
        count = table.num_rows
    else:
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            count = print_result(df, fmt, f)
    os.replace(tmp, path)
    return count


# ---------------------------------------------------------------------------- Spark's errors

_STACK = "\n\nJVM stacktrace:\n"  # how PySpark appends the server's (or driver's) Java stack trace


def spark_error(err: BaseException, verbose: bool = False) -> str:
    """What went wrong, in Spark's words: its message without a Java stack trace or query plan
    (Spark Connect's errors carry the server's stack trace in their message), or with `verbose`
    the whole message and the JVM's stack trace."""
    from pyspark.errors import AnalysisException, ParseException, PySparkException
    from py4j.protocol import Py4JJavaError
    if isinstance(err, Py4JJavaError):
        if verbose:
            return str(err).strip()
        message = str(err.java_exception.getMessage() or err.java_exception.toString())
        return "\n".join(message.strip().splitlines()[:3])
    if not isinstance(err, PySparkException):
        return f"{type(err).__name__}: {err}"
    if isinstance(err, AnalysisException) and not isinstance(err, ParseException):
        message = err.getMessage()
    else:
        message = str(err)  # a ParseException's shows the statement with a caret
    message, _, trace = message.partition(_STACK)
    if verbose:
        # Spark Connect's client sends the server's stack trace when that server's settings say so
        # (spark.sql.connect.serverStacktrace.enabled), a classic session's has it always.
        trace = trace or getattr(err, "getStackTrace", lambda: None)() or getattr(err, "_stackTrace", None) or ""
        return message.strip() + (_STACK + trace.strip() if trace.strip() else "")
    return message.strip()


def condition(err: BaseException) -> str | None:
    """Spark's error condition (TABLE_OR_VIEW_NOT_FOUND, ...), if it has one."""
    try:
        return err.getCondition()  # type: ignore[attr-defined]
    except Exception:
        return None


def spark_errors() -> tuple[type[BaseException], ...]:
    """Spark's exception types, for an `except` clause; none without Spark installed (an `except`
    evaluated as another error propagates must not raise an ImportError of its own)."""
    try:
        from pyspark.errors import PySparkException
        from py4j.protocol import Py4JJavaError
    except ImportError:
        return ()
    return PySparkException, Py4JJavaError


def pairs(values: list[str], option: str) -> dict[str, str]:
    out = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name.strip() or not rest:
            raise ValueError(f"{option} {value!r}: expected NAME=VALUE")
        out[name.strip()] = rest
    return out
