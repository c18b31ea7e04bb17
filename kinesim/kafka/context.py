"""What a handler knows of the connection it serves."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Callable


class CloseConnection(Exception):
    """A handler's way to close its connection instead of answering (a failed acks=0 Produce)."""


@dataclass(frozen=True, slots=True)
class Context:
    kinesis: Any          # the KinesisService of the connection's scope
    cluster_id: str       # fixed per data directory (listener.cluster_id)
    host: str             # the address the client reached us by: advertised as broker 0's
    port: int
    node_id: int = 0      # kinesim is a cluster of one broker, node 0, leader of everything
    pool: Any = None      # the listener's executor: the store is not touched on the loop
    services: Any = None  # the server's Services (SASL resolves a connection's scope through them)
    session: Any = None   # the connection's sasl.Session: who it authenticated as, if it did
    # Closed shards (uids) this connection was already told NOT_LEADER_OR_FOLLOWER for (resharding's
    # nudge, kafka/resharding.py); the same set across `dataclasses.replace`, as the connection is one.
    nudged: set[int] = field(default_factory=set)

    async def blocking(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` in the pool, for async handlers (Fetch), which wait on the loop and read
        the store in between."""
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)
