"""What a mapping reports and persists: its LastProcessingResult and its checkpoint, both written
through one gate that closes (`seal`) once the mapping's poller stopped, so an invocation still
running then can never overwrite what a newer poller on the same store wrote."""
from __future__ import annotations

import threading

from ..kinesis.checkpoints import Checkpoint, ShardMark
from .checkpoints import Checkpoints

NO_RECORDS = "No records processed"
OK = "OK"
FUNCTION_FAILED = "PROBLEM: Function call failed"
FUNCTION_NOT_FOUND = "PROBLEM: Function not found"
STREAM_NOT_FOUND = "PROBLEM: Stream not found"
# The consumer of an enhanced fan-out mapping was deregistered: like a deleted stream, the mapping
# stays Enabled and says why it reads nothing (no AWS evidence found either way; see docs/functions.md).
CONSUMER_NOT_FOUND = "PROBLEM: Stream consumer not found"


class MappingStatus:
    def __init__(self, checkpoints: Checkpoints):
        self.checkpoints = checkpoints
        self.result = checkpoints.load_result() or NO_RECORDS
        self.lock = threading.Lock()     # guards `sealed` and the writes
        self.sealed = False              # stopped and joined: nothing more is written

    def set_result(self, result: str) -> None:
        """LastProcessingResult; persisted when it changes (not per batch)."""
        with self.lock:
            if result == self.result:
                return
            self.result = result
            if not self.sealed:
                self.checkpoints.save_result(result)

    def save(self, checkpoint: Checkpoint, mark: ShardMark | None = None) -> bool:
        """Persist the checkpoint (`mark`: only that shard's mark moved); False (nothing written)
        once sealed."""
        with self.lock:
            if self.sealed:
                return False
            self.checkpoints.save(checkpoint, mark)
            return True

    def seal(self) -> None:
        with self.lock:
            self.sealed = True
