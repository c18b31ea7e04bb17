"""`kinesim sql`: Spark SQL over what Firehose delivered, each delivery stream a table.

  kinesim sql "SELECT page, count(*) AS n FROM clicks_archive GROUP BY page ORDER BY n DESC"
  kinesim sql --shell                      # interactive; statements end with ';'
  kinesim sql --format json "SELECT ..."   # one JSON object per line (also: csv, table)
  kinesim sql --output top.parquet "SELECT ..."
  kinesim sql --table raw=s3://my-bucket/raw/ "SELECT count(*) FROM raw"
  echo "SHOW TABLES; SELECT ..." | kinesim sql
  kinesim sql --continuous --print "SELECT * FROM STREAM clicks WHERE page LIKE '/cart%'"
  kinesim sql --continuous --name views --into page-views --event-time ts --watermark "1 minute" \
      "SELECT page, window.start AS minute, count(*) AS views FROM STREAM clicks GROUP BY window(ts, '1 minute'), page"

Every delivery stream of the server becomes a temp view named after it (dashes and dots become
underscores: `clicks-archive` -> `clicks_archive`), read from the objects it delivered: JSON
lines (gzip and hadoop-snappy read by Spark; ZIP and snappy-java decompressed first) or Parquet /
ORC, with `k=v/` directories and dynamic-partitioning keys as columns. Error output is left out.
Tables are a snapshot taken at start (`\\refresh` in the shell takes a new one); JSON tables'
schemas are kept with the server's state, so a command reads only what was delivered since the
last one to infer them. A statement Spark refuses is reported in one line (`--verbose`: with its
plan and Java stack trace) and the command exits 1.
"""
from __future__ import annotations

import argparse
import itertools
import os
import sys
import threading
import time
from contextlib import contextmanager
from typing import IO, Any, Iterator

from .remote import local_spark_running, remote_session, scratch_root
from .results import (ascii_table, condition, output_format, pairs, print_result, spark_error, spark_errors,
                      write_result)

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
    parser.add_argument("--verbose", action="store_true",
                        help="show Spark's whole error message (query plan, statement) and its Java stack trace, "
                             "not only its first line")
    from .queries_cli import add_continuous_arguments
    add_continuous_arguments(parser)
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

class Session:
    """A running `kinesim sql`: the Spark session, its tables, and how results are shown."""

    def __init__(self, args: argparse.Namespace, out: IO[str], err: IO[str]):
        self.args, self.out, self.err = args, out, err
        self.tables = pairs(args.table, "--table")
        self.conf = pairs(args.conf, "--conf")
        self.spark: Any = None
        self.catalog: Any = None
        self.slot: Any = None          # the kept session this command uses (sessions), if any
        self.spark_identity: tuple[str, int] = ("", 0)

    def say(self, text: str) -> None:
        self.err.write(f"kinesim sql: {text}\n")
        self.err.flush()

    def error(self, error: BaseException) -> None:
        """Spark's error as a SQL user expects it: one line (`[CONDITION] message`), or with
        --verbose everything Spark says (the plan, the statement with a caret, the stack trace)."""
        text = spark_error(error, self.args.verbose)
        self.say(f"error: {text if self.args.verbose else text.splitlines()[0] if text else type(error).__name__}")

    def start(self) -> None:
        from .session import check_java, spark_session
        from .tables import plan_tables
        check_java()
        local = bool(self.args.master or local_spark_running()) and not self.args.remote
        # The server first: a wrong endpoint fails in a second, not after Spark's start-up.
        with spinner("asking kinesim for its delivery streams", self.err):
            sources, catalog = plan_tables(self.args.endpoint_url, tables=self.tables,
                                           streams=not self.args.no_streams)
        if local:
            with spinner("starting Spark", self.err):
                self.spark = spark_session(self.args.master or "local[*]", "kinesim sql", log_level=self.args.log_level.upper(),
                                           progress=self.err.isatty(), **self.conf)
        else:
            from .connect_server import ensure, recorded_pid, state_dir
            from .sessions import open_session, take
            s3_root = catalog.s3_root or scratch_root()
            remote = self.args.remote or ensure(self.args.endpoint_url, s3_root, self.args.spark_memory, self.say)
            # kinesim's warm Spark: a session kept from the last command (sessions), when one is free.
            self.slot = None if self.args.remote else take(os.path.join(state_dir(s3_root), "sessions"))
            if self.slot is not None:
                self.spark_identity = (remote, recorded_pid(state_dir(s3_root)))
                self.spark = open_session(remote, self.spark_identity[1], self.slot, self.conf)
            else:
                self.spark = remote_session(remote, self.conf)
        # Per command (temp views live as long as this client's session): what was delivered
        # until now, including objects written after the warm server started.
        self.register(sources, catalog)

    def register(self, sources: list | None = None, catalog: Any = None) -> None:
        from .state import schema_cache, warm_tables
        from .tables import plan_tables, register_sources
        if sources is None:
            sources, catalog = plan_tables(self.args.endpoint_url, tables=self.tables,
                                           streams=not self.args.no_streams)
        # JSON tables' schemas are kept with the server's state: a command reads only what was
        # delivered since the last one to infer them. Tables are kept in kinesim's warm Spark's
        # memory (table_cache): not in a Spark of this process, nor in another Spark Connect server.
        schemas = schema_cache(catalog.s3_root, self.conf) if catalog.s3_root else None
        warm = warm_tables(catalog.s3_root, self.conf) \
            if catalog.s3_root and not self.args.remote and _is_remote(self.spark) else None
        with spinner("reading what was delivered", self.err):
            self.catalog = register_sources(self.spark, sources, catalog, self.args.cache_dir, schemas=schemas,
                                            warm=warm)
            if self.slot is not None:
                from .sessions import registered
                registered(self.spark, self.slot, [t.name for t in self.catalog.tables])
        for note in self.catalog.notes:
            self.say(note)
        if not self.catalog.tables:
            waiting = f" (delivery streams with nothing delivered yet: {', '.join(self.catalog.empty)})" \
                if self.catalog.empty else ""
            self.say(NO_TABLES + waiting)

    def execute(self, statement: str, output: str | None = None) -> bool:
        """Run one statement and show (or write) its result; False when Spark refused it."""
        started = time.monotonic()
        if self.slot is not None:
            from .sessions import read_only
            # A statement that may change the session (a view, a setting...): not for the next command.
            self.slot.reusable = self.slot.reusable and read_only(statement)
        try:
            df = self.spark.sql(statement)
            if output:
                count = write_result(df, output, output_format(output, self.args.output_format))
                self.say(f"wrote {count} row{'s' * (count != 1)} to {output}")
            else:
                count = print_result(df, self.args.format, self.out)
                if self.err.isatty() and df.columns:
                    self.err.write(f"({count} row{'s' * (count != 1)}, {time.monotonic() - started:.1f} s)\n")
        except spark_errors() as error:
            self.error(error)
            if condition(error) == "TABLE_OR_VIEW_NOT_FOUND":
                self.say(self.tables_hint())
            return False
        except KeyboardInterrupt:
            if _is_remote(self.spark):
                self.spark.interruptAll()
            else:
                self.spark.sparkContext.cancelAllJobs()
            self.say("cancelled")
            return False
        return True

    def finish(self) -> None:
        """Leave the kept session for the next command, or release it (sessions)."""
        if self.slot is not None:
            from .sessions import finish
            finish(self.spark, self.slot, *self.spark_identity)
            self.slot = None

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


def _is_remote(spark: Any) -> bool:
    return bool(getattr(spark, "is_remote", lambda: False)()) or not hasattr(spark, "sparkContext")


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
    from . import spark_extra
    from .session import JavaNotFoundError
    from .tables import ServerUnreachable
    out, err, stdin = out or sys.stdout, err or sys.stderr, stdin or sys.stdin
    if spark_extra.missing():  # Spark is an extra of kinesim's install: say how to add it, before anything else
        err.write(spark_extra.message("kinesim sql") + "\n")
        return 1
    if getattr(args, "continuous", False):
        from .queries_cli import run_continuous
        return run_continuous(args, out, err)
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
    except spark_errors() as error:
        session.error(error)
        return 1
    try:
        if shell:
            return session.shell(stdin)
        return session.run_script(script)
    finally:
        session.finish()
