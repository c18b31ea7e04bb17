"""Firehose buffers: records a delivery stream acknowledged (PutRecord/PutRecordBatch) and has not
yet delivered, in arrival order. Rows leave only after the object holding them is written.

A part of `Store` (its main database's writer, lock, readers, space reclaimer and checkpointer),
kept apart to keep the record log's module short.
"""
from __future__ import annotations

from .ranges import wal_bytes
from .transaction import transaction


class FirehoseBuffers:
    def firehose_buffer_append(self, stream: str, rows: list[tuple[int, bytes, float]]) -> None:
        """Commit (seq, data, arrival) rows of one delivery stream in one transaction."""
        with self._write_lock:
            self._checkpoints.wrote(wal_bytes(1, len(rows), sum(len(data) for _, data, _ in rows)))
            with transaction(self._write) as w:
                w.executemany("INSERT INTO firehose_buffer (stream, seq, data, arrival) VALUES (?, ?, ?, ?)",
                              [(stream, seq, data, arrival) for seq, data, arrival in rows])

    def firehose_buffer_read(self, stream: str, after_seq: int, limit: int) -> list[tuple[int, bytes, float]]:
        """Up to `limit` buffered (seq, data, arrival) rows with seq > `after_seq`, oldest first."""
        return self._reader().execute(
            "SELECT seq, data, arrival FROM firehose_buffer WHERE stream=? AND seq>? ORDER BY seq LIMIT ?",
            (stream, after_seq, limit)).fetchall()

    def firehose_buffer_stats(self, stream: str) -> tuple[int, int, int | None, float | None]:
        """(record count, total bytes, highest seq, oldest arrival) of a delivery stream's buffer."""
        count, size, top = self._reader().execute(
            "SELECT count(*), coalesce(sum(length(data)), 0), max(seq) FROM firehose_buffer WHERE stream=?",
            (stream,)).fetchone()
        row = self._reader().execute(
            "SELECT arrival FROM firehose_buffer WHERE stream=? ORDER BY seq LIMIT 1", (stream,)).fetchone()
        return count, size, top, row[0] if row else None

    def firehose_buffer_clear(self) -> None:
        """Remove every delivery stream's rows (a reset of Firehose)."""
        with self._write_lock:
            self._write.execute("DELETE FROM firehose_buffer")
        self._space.freed()

    def firehose_buffer_delete(self, stream: str, through_seq: int | None = None) -> None:
        """Remove a delivery stream's rows up to and including `through_seq` (all when None)."""
        with self._write_lock:
            if through_seq is None:
                self._write.execute("DELETE FROM firehose_buffer WHERE stream=?", (stream,))
            else:
                self._write.execute("DELETE FROM firehose_buffer WHERE stream=? AND seq<=?", (stream, through_seq))
        self._space.freed()

