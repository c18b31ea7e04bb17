"""One account's and region's view of the store (issue 34).

Every scope's services keep their documents in the one database, under kinds prefixed with the scope
(`@111111111111/eu-west-1/stream`; `@111111111111//iam-user` for what belongs to a whole account).
The server's own scope (`--account-id`, `--region`) has no prefix at all: it reads and writes the
store itself, so a data directory written before scopes existed is that scope's, unchanged.

Records are keyed by shard uids, which are unique across scopes (`kinesis/uids.py`): reads and
writes of records go to the store as they are. Firehose's buffers are keyed by the delivery stream's
name, so the name is prefixed as a kind is.
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Iterator

_PREFIXED = re.compile(r"@(\d{12})/([^/]*)/(.*)", re.S)


def prefix(account: str, region: str) -> str:
    """The prefix of a scope's kinds (`region` "" for what belongs to the whole account)."""
    return f"@{account}/{region}/"


def split_kind(kind: str) -> tuple[str | None, str | None, str]:
    """`(account, region, kind)` of a stored kind; `(None, None, kind)` for the server's own scope."""
    m = _PREFIXED.fullmatch(kind)
    return (m.group(1), m.group(2), m.group(3)) if m else (None, None, kind)


def every_scope(store: Any, kind: str) -> Iterator[Any]:
    """The documents of `kind` of every scope (the server's own and every prefixed one)."""
    for stored in store.document_kinds():
        if split_kind(stored)[2] == kind:
            yield from store.documents(stored).values()


def scopes_with_documents(store: Any) -> set[tuple[str, str]]:
    """The (account, region) pairs that have documents in the store, besides the server's own."""
    found = set()
    for stored in store.document_kinds():
        account, region, _ = split_kind(stored)
        if account is not None and region:
            found.add((account, region))
    return found


class ScopedStore:
    """The store as one scope sees it: documents and Firehose buffers under the scope's prefix,
    everything else (records, readers, the file's path) the store's own."""

    _NAMED = ("documents", "document_count", "document", "put_document", "delete_document", "put_documents",
              "delete_documents")

    def __init__(self, store: Any, scope_prefix: str):
        self.base = store
        self.prefix = scope_prefix

    def __getattr__(self, name: str) -> Any:  # records, readers, path, close...: the store's own
        value = getattr(self.base, name)
        if callable(value):
            self.__dict__[name] = value  # kept: the next lookup is a plain attribute
        return value

    def documents(self, kind: str) -> dict[str, Any]:
        return self.base.documents(self.prefix + kind)

    def document_count(self, kind: str) -> int:
        return self.base.document_count(self.prefix + kind)

    def document(self, kind: str, name: str) -> Any | None:
        return self.base.document(self.prefix + kind, name)

    def put_document(self, kind: str, name: str, body: Any) -> None:
        self.base.put_document(self.prefix + kind, name, body)

    def delete_document(self, kind: str, name: str) -> None:
        self.base.delete_document(self.prefix + kind, name)

    def put_documents(self, kind: str, bodies: dict[str, Any]) -> None:
        self.base.put_documents(self.prefix + kind, bodies)

    def delete_documents(self, kind: str, names: Iterable[str] | None = None) -> None:
        self.base.delete_documents(self.prefix + kind, names)

    def document_kinds(self) -> list[str]:
        n = len(self.prefix)
        return [kind[n:] for kind in self.base.document_kinds() if kind.startswith(self.prefix)]

    # Firehose's buffers, by delivery stream name

    def firehose_buffer_append(self, stream: str, rows: list[tuple[int, bytes, float]]) -> None:
        self.base.firehose_buffer_append(self.prefix + stream, rows)

    def firehose_buffer_read(self, stream: str, after_seq: int, limit: int) -> list[tuple[int, bytes, float]]:
        return self.base.firehose_buffer_read(self.prefix + stream, after_seq, limit)

    def firehose_buffer_stats(self, stream: str) -> tuple[int, int, int | None, float | None]:
        return self.base.firehose_buffer_stats(self.prefix + stream)

    def firehose_buffer_delete(self, stream: str, through_seq: int | None = None) -> None:
        self.base.firehose_buffer_delete(self.prefix + stream, through_seq)
