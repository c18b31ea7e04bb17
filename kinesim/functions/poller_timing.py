"""The delays of a mapping's pollers, fixed when its MappingManager is made (from the module
attributes of pollers.py, which tests shorten)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Timing:
    retry_backoff_s: float       # delay before the first retry of a failed batch; doubles per retry
    retry_backoff_max_s: float
    problem_retry_s: float       # delay when the function could not be invoked at all
    scan_s: float                # how often a mapping looks for its stream and new shards unprompted
    pass_checkpoint_s: float     # how often a lane saves a position moved only by records it passed
    stop_join_s: float           # how long close() waits for threads (an invocation may be running)

    def backoff(self, retries: int) -> float:
        return min(self.retry_backoff_s * 2 ** (retries - 1), self.retry_backoff_max_s)
