"""`kinesim sql`: Spark SQL over what Firehose delivered, each delivery stream a table.

  kinesim sql "SELECT page, count(*) AS n FROM clicks_archive GROUP BY page ORDER BY n DESC"
  kinesim sql --shell                      # interactive; statements end with ';'
  kinesim sql --format json "SELECT ..."   # one JSON object per line (also: csv, table)
  kinesim sql --output top.parquet "SELECT ..."
  kinesim sql --table raw=s3://my-bucket/raw/ "SELECT count(*) FROM raw"
  echo "SHOW TABLES; SELECT ..." | kinesim sql

Every delivery stream of the server becomes a temp view named after it (dashes and dots become
underscores: `clicks-archive` -> `clicks_archive`), read from the objects it delivered: JSON
lines (gzip and hadoop-snappy read by Spark; ZIP and snappy-java decompressed first) or Parquet /
ORC, with `k=v/` directories and dynamic-partitioning keys as columns. Error output is left out.
Tables are a snapshot taken at start (`\\refresh` in the shell takes a new one).
"""
from __future__ import annotations

import argparse
import base64
import csv
import datetime as dt
import decimal
import itertools
import json
import math
import os
import sys
import threading
import time
from contextlib import contextmanager
from typing import IO, Any, Iterator

DESCRIPTION = __doc__
EPILOG = """\
Spark runs in a warm Spark Connect server kept by kinesim (started by the first query, ~20-40 s, reused
afterwards; `--master local[*]` runs it in this process instead, `--remote sc://...` uses another one).
It needs Java 17+. Settings go to Spark as they are:
  --conf spark.driver.memory=4g --conf spark.sql.shuffle.partitions=8

Shell commands: \\tables (or .tables) lists the tables, \\refresh re-reads what was delivered,
\\q (or .quit, Ctrl-D) leaves; Ctrl-C cancels the running statement. History is kept in
~/.kinesim_sql_history.
"""
DEFAULT_ENDPOINT = "http://localhost:4566"
HISTORY = os.path.join(os.path.expanduser("~"), ".kinesim_sql_history")
PROMPT, CONTINUATION = "kinesim> ", "      -> "
NO_TABLES = ("no delivery streams have delivered anything yet; put records to one (they appear once its buffer "
             "is flushed) or register a prefix with --table NAME=s3://bucket/prefix")


def configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("query", nargs="?", help="SQL to run (several statements: separate them with ';'); "
                                                 "none: read it from stdin, or a shell when stdin is a terminal")
    parser.add_argument("--shell", action="store_true", help="interactive shell (statements end with ';')")
    parser.add_argument("--format", choices=("table", "csv", "json"), default="table",
                        help="how results are printed: an aligned table, CSV with a header, or JSON lines "
                             "(default: table)")
    parser.add_argument("--output", metavar="PATH", help="write the (last) result to PATH instead of printing it: "
                                                         "Parquet, CSV or JSON lines by its extension")
    parser.add_argument("--output-format", choices=("parquet", "csv", "json"),
                        help="the --output file's format when its extension does not say")
    parser.add_argument("--table", action="append", default=[], metavar="NAME=s3://BUCKET/PREFIX",
                        help="also register a bucket prefix (or a local directory) as table NAME; repeatable")
    parser.add_argument("--no-streams", action="store_true",
                        help="register only --table tables, not the delivery streams")
    parser.add_argument("--endpoint-url", default=os.environ.get("AWS_ENDPOINT_URL") or DEFAULT_ENDPOINT,
                        help=f"the kinesim server (default: $AWS_ENDPOINT_URL, else {DEFAULT_ENDPOINT})")
    parser.add_argument("--master", help="run Spark in this process with this master (local[*], spark://..., "
                                         "yarn) instead of using kinesim's warm Spark Connect server")
    parser.add_argument("--remote", help="a Spark Connect server to use (sc://host:port) instead of kinesim's")
    parser.add_argument("--spark-memory", metavar="SIZE",
                        help="driver memory of the warm Spark server when this command starts it (e.g. 4g)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting; repeatable")
    parser.add_argument("--cache-dir", help="where decompressed copies of ZIP / snappy-java objects are kept "
                                            "(default: a temporary directory removed at exit)")
    parser.add_argument("--log-level", choices=("error", "warn", "info"), default="error",
                        help="Spark's log level on stderr (default: error)")
    return parser


# ---------------------------------------------------------------------------- statements

def split_statements(text: str) -> tuple[list[str], str]:
    """Complete statements (ended by ';' outside quotes and comments) and the unfinished rest."""
    statements, start, i, n = [], 0, 0, len(text)
    quote: str | None = None
    while i < n:
        c = text[i]
        if quote:
            if c == "\\" and quote != "`":
                i += 1  # Spark string literals escape with a backslash
            elif c == quote:
                quote = None
        elif c in "'\"`":
            quote = c
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        elif c == ";":
            statements.append(text[start:i])
            start = i + 1
        i += 1
    return [s.strip() for s in statements if _has_sql(s)], text[start:]


def _has_sql(text: str) -> bool:
    """Whether a piece of a script holds more than blanks and comments."""
    while True:
        text = text.strip()
        if text.startswith("--"):
            text = text.split("\n", 1)[1] if "\n" in text else ""
        elif text.startswith("/*") and "*/" in text:
            text = text.split("*/", 1)[1]
        else:
            return bool(text)


# ---------------------------------------------------------------------------- values and output

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


def _numeric(df: Any) -> list[bool]:
    from pyspark.sql.types import NumericType
    return [isinstance(f.dataType, NumericType) for f in df.schema.fields]


def print_result(df: Any, fmt: str, out: IO[str]) -> int:
    """Print a DataFrame's rows; returns how many."""
    columns = df.columns
    if not columns:
        return 0  # a command (CREATE VIEW, SET x=y ...) with nothing to show
    if fmt == "table":
        rows = df.collect()
        out.write(ascii_table(columns, [[cell(v) for v in row] for row in rows], _numeric(df)))
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


# ---------------------------------------------------------------------------- errors and progress

def spark_error(err: BaseException) -> str:
    """What went wrong, in Spark's words, without a Java stack trace or query plan."""
    from pyspark.errors import AnalysisException, ParseException, PySparkException
    from py4j.protocol import Py4JJavaError
    if isinstance(err, ParseException):
        return str(err).strip()  # its message shows the statement with a caret
    if isinstance(err, AnalysisException):
        return err.getMessage().strip()
    if isinstance(err, PySparkException):
        return str(err).strip()
    if isinstance(err, Py4JJavaError):
        message = str(err.java_exception.getMessage() or err.java_exception.toString())
        return "\n".join(message.strip().splitlines()[:3])
    return f"{type(err).__name__}: {err}"


def _condition(err: BaseException) -> str | None:
    """Spark's error condition (TABLE_OR_VIEW_NOT_FOUND, ...), if it has one."""
    try:
        return err.getCondition()  # type: ignore[attr-defined]
    except Exception:
        return None


def _spark_errors() -> tuple[type[BaseException], ...]:
    from pyspark.errors import PySparkException
    from py4j.protocol import Py4JJavaError
    return PySparkException, Py4JJavaError


@contextmanager
def spinner(text: str, stream: IO[str]) -> Iterator[None]:
    """A spinner with `text` on `stream` while the block runs, only on a terminal."""
    if not getattr(stream, "isatty", lambda: False)():
        yield
        return
    done = threading.Event()

    def spin() -> None:
        for frame in itertools.cycle("|/-\\"):
            stream.write(f"\r{frame} {text}")
            stream.flush()
            if done.wait(0.1):
                break
        stream.write("\r" + " " * (len(text) + 2) + "\r")
        stream.flush()
    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


# ---------------------------------------------------------------------------- the command

def _pairs(values: list[str], option: str) -> dict[str, str]:
    out = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name.strip() or not rest:
            raise ValueError(f"{option} {value!r}: expected NAME=VALUE")
        out[name.strip()] = rest
    return out


def _local_spark_running() -> bool:
    """Whether this process already runs a classic Spark (run() called from Python next to
    `spark_session()`): that one is used, as PySpark cannot mix it with a Connect client."""
    if "pyspark" not in sys.modules:
        return False
    from pyspark import SparkContext
    return SparkContext._active_spark_context is not None


def _scratch_root() -> str:
    """Where the warm server's state goes when only local --table directories are read."""
    return os.path.join(os.path.expanduser("~"), ".kinesim", "s3")


def remote_session(remote: str, conf: dict[str, str]) -> Any:
    """A Spark Connect client session; runtime settings of `conf` applied to it."""
    from pyspark.sql import SparkSession
    from .session import _quiet_pyspark_loggers
    _quiet_pyspark_loggers()
    spark = SparkSession.builder.remote(remote).getOrCreate()
    for key, value in conf.items():
        spark.conf.set(key, value)
    return spark


class Session:
    """A running `kinesim sql`: the Spark session, its tables, and how results are shown."""

    def __init__(self, args: argparse.Namespace, out: IO[str], err: IO[str]):
        self.args, self.out, self.err = args, out, err
        self.tables = _pairs(args.table, "--table")
        self.conf = _pairs(args.conf, "--conf")
        self.spark: Any = None
        self.catalog: Any = None

    def say(self, text: str) -> None:
        self.err.write(f"kinesim sql: {text}\n")
        self.err.flush()

    def start(self) -> None:
        from .session import check_java, spark_session
        from .tables import plan_tables
        check_java()
        # The server first: a wrong endpoint fails in a second, not after Spark's start-up.
        with spinner("asking kinesim for its delivery streams", self.err):
            sources, catalog = plan_tables(self.args.endpoint_url, tables=self.tables,
                                           streams=not self.args.no_streams)
        if (self.args.master or _local_spark_running()) and not self.args.remote:
            with spinner("starting Spark", self.err):
                self.spark = spark_session(self.args.master or "local[*]", "kinesim sql", log_level=self.args.log_level.upper(),
                                           progress=self.err.isatty(), **self.conf)
        else:
            from .connect_server import ensure
            remote = self.args.remote or ensure(self.args.endpoint_url, catalog.s3_root or _scratch_root(),
                                                self.args.spark_memory, self.say)
            self.spark = remote_session(remote, self.conf)
        # Per command (temp views live as long as this client's session): what was delivered
        # until now, including objects written after the warm server started.
        self.register(sources, catalog)

    def register(self, sources: list | None = None, catalog: Any = None) -> None:
        from .tables import plan_tables, register_sources
        if sources is None:
            sources, catalog = plan_tables(self.args.endpoint_url, tables=self.tables,
                                           streams=not self.args.no_streams)
        with spinner("reading what was delivered", self.err):
            self.catalog = register_sources(self.spark, sources, catalog, self.args.cache_dir)
        for note in self.catalog.notes:
            self.say(note)
        if not self.catalog.tables:
            waiting = f" (delivery streams with nothing delivered yet: {', '.join(self.catalog.empty)})" \
                if self.catalog.empty else ""
            self.say(NO_TABLES + waiting)

    def execute(self, statement: str, output: str | None = None) -> bool:
        """Run one statement and show (or write) its result; False when Spark refused it."""
        started = time.monotonic()
        try:
            df = self.spark.sql(statement)
            if output:
                count = write_result(df, output, output_format(output, self.args.output_format))
                self.say(f"wrote {count} row{'s' * (count != 1)} to {output}")
            else:
                count = print_result(df, self.args.format, self.out)
                if self.err.isatty() and df.columns:
                    self.err.write(f"({count} row{'s' * (count != 1)}, {time.monotonic() - started:.1f} s)\n")
        except _spark_errors() as error:
            self.say(f"error: {spark_error(error)}")
            if _condition(error) == "TABLE_OR_VIEW_NOT_FOUND":
                self.say(self.tables_hint())
            return False
        except KeyboardInterrupt:
            if getattr(self.spark, "is_remote", lambda: False)() or not hasattr(self.spark, "sparkContext"):
                self.spark.interruptAll()
            else:
                self.spark.sparkContext.cancelAllJobs()
            self.say("cancelled")
            return False
        return True

    def run_script(self, text: str) -> int:
        statements, rest = split_statements(text)
        if _has_sql(rest):
            statements.append(rest.strip())
        if not statements:
            self.say("no SQL statement given")
            return 2
        for i, statement in enumerate(statements):
            last = i == len(statements) - 1
            if not self.execute(statement, self.args.output if last else None):
                return 1
        return 0

    def tables_hint(self) -> str:
        names = ", ".join(t.name for t in self.catalog.tables) or "none"
        empty = f"; nothing delivered yet: {', '.join(self.catalog.empty)}" if self.catalog.empty else ""
        return f"tables: {names}{empty}"

    # -- the shell

    def show_tables(self) -> None:
        rows = [[t.name, t.format, str(t.files), ", ".join(t.partition_columns), t.location
                 + (f" ({t.decompressed} decompressed)" if t.decompressed else "")] for t in self.catalog.tables]
        rows += [[name, "-", "0", "", "nothing delivered yet"] for name in self.catalog.empty]
        self.out.write(ascii_table(["table", "format", "objects", "partition columns", "source"], rows,
                                   [False, False, True, False, False]))

    def shell(self, stdin: IO[str]) -> int:
        interactive = stdin.isatty()
        if interactive:
            _load_history()
            self.err.write("kinesim sql shell: statements end with ';'; \\tables lists tables, \\q leaves\n")
        buffer, failed = "", False
        while True:
            try:
                line = _read_line(stdin, (CONTINUATION if buffer.strip() else PROMPT) if interactive else None)
            except KeyboardInterrupt:
                self.err.write("\n")
                buffer = ""
                continue
            if line is None:  # end of input: run what is left
                if _has_sql(buffer):
                    failed |= not self.execute(buffer.strip())
                break
            if not buffer.strip() and self.command(line.strip()):
                if line.strip() in _QUIT:
                    break
                continue
            statements, buffer = split_statements(buffer + line + "\n")
            for statement in statements:
                failed |= not self.execute(statement)
        if interactive:
            _save_history()
        return 1 if failed and not interactive else 0

    def command(self, line: str) -> bool:
        """Run a shell command (\\tables ...); False when the line is SQL."""
        if line in _QUIT:
            return True
        name = line.lstrip("\\.").split()[0].lower() if line[:1] in ("\\", ".") and len(line) > 1 else ""
        if name == "tables":
            self.show_tables()
        elif name == "refresh":
            self.register()
            self.say(f"{len(self.catalog.tables)} table(s)")
        elif name in ("help", "h", "?"):
            self.err.write(EPILOG)
        else:
            return False
        return True


_QUIT = {"\\q", ".quit", ".exit", "quit", "exit", "\\quit", "quit;", "exit;"}


def _read_line(stdin: IO[str], prompt: str | None) -> str | None:
    if prompt is not None and stdin is sys.stdin:
        try:
            return input(prompt)  # readline editing and history
        except EOFError:
            sys.stderr.write("\n")
            return None
    line = stdin.readline()
    return None if not line else line.rstrip("\n")


def _load_history() -> None:
    try:
        import readline
        readline.read_history_file(HISTORY)
    except (ImportError, OSError):
        pass


def _save_history() -> None:
    try:
        import readline
        readline.set_history_length(1000)
        readline.write_history_file(HISTORY)
    except (ImportError, OSError):
        pass


def run(args: argparse.Namespace, out: IO[str] | None = None, err: IO[str] | None = None,
        stdin: IO[str] | None = None) -> int:
    """`kinesim sql`: 0 when every statement ran, 1 when one failed (or Spark / the server could not
    be used), 2 for a usage error."""
    from .session import JavaNotFoundError
    from .tables import ServerUnreachable
    out, err, stdin = out or sys.stdout, err or sys.stderr, stdin or sys.stdin
    try:
        session = Session(args, out, err)
        if args.output:
            output_format(args.output, args.output_format)
        if args.query is not None and args.shell:
            raise ValueError("give a query or --shell, not both")
    except ValueError as error:
        err.write(f"kinesim sql: {error}\n")
        return 2
    script = args.query
    shell = args.shell or (script is None and stdin.isatty())
    if script is None and not shell:
        script = stdin.read()
    try:
        session.start()
    except JavaNotFoundError as error:
        session.say(str(error))
        return 1
    except (ServerUnreachable, LookupError) as error:
        session.say(str(error))
        return 1
    except _spark_errors() as error:
        session.say(f"error: {spark_error(error)}")
        return 1
    if shell:
        return session.shell(stdin)
    return session.run_script(script)
