"""One explicit transaction on a connection opened with isolation_level=None (autocommit)."""
from __future__ import annotations

import contextlib
import sqlite3
from typing import Iterator


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN, then COMMIT when the block ends, or ROLLBACK if it raises (Ctrl-C included): the
    connection is never left inside a transaction. The caller holds the connection's write lock."""
    conn.execute("BEGIN")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
