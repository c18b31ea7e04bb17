"""Server settings: one object, filled by the CLI (or a test), read by every service."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass


@dataclass
class Settings:
    host: str = "127.0.0.1"
    port: int = 4566
    data_dir: str = ".kinesim"
    in_memory: bool = False
    # How long streams stay CREATING / DELETING / UPDATING. AWS takes seconds; small by default
    # so local code that waits for ACTIVE still exercises the wait.
    create_stream_ms: int = 100
    delete_stream_ms: int = 100
    update_stream_ms: int = 100
    # AWS's default shard quota in us-east-1 (200 in most other regions).
    shard_limit: int = 500
    region: str = "us-east-1"
    account_id: str = "000000000000"
    enforce_limits: bool = False
    log_level: str = "info"
    # AWS's fixed 5 minutes; settable so tests can see expiry without waiting.
    iterator_ttl_s: float = 300.0
    # How often expired records are deleted (reads hide them at once regardless).
    retention_sweep_s: float = 60.0

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "Settings":
        return cls(**json.loads(text))
