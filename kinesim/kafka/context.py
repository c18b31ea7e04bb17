"""What a handler knows of the connection it serves."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Context:
    kinesis: Any          # the KinesisService of the connection's scope
    cluster_id: str       # fixed per data directory (listener.cluster_id)
    host: str             # the address the client reached us by: advertised as broker 0's
    port: int
    node_id: int = 0      # kinesim is a cluster of one broker, node 0, leader of everything
