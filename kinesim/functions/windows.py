"""Tumbling windows of a mapping lane (TumblingWindowInSeconds): which window a record falls in,
the window a lane opens, when it is over, and AWS's 1 MB limit on its state."""
from __future__ import annotations

import math
import time
from typing import Any

import orjson

WINDOW_GRACE_S = 0.05        # after a tumbling window's end, for puts stamped just before it
MAX_WINDOW_STATE_BYTES = 1 << 20   # AWS's 1 MB of tumbling-window state per shard


def window_start(arrival: float, size_s: int) -> float:
    """The start of the window a record that arrived at `arrival` belongs to (windows are aligned
    on multiples of their size, by arrival time)."""
    return math.floor(arrival / size_s) * size_s


def opened(start: float, size_s: int) -> dict[str, Any]:
    """A lane's open window, as its checkpoint keeps it."""
    return {"start": start, "end": start + size_s, "state": {}}


def due_in(window: dict[str, Any]) -> float:
    """Seconds until the window may be closed (its end, plus grace for puts stamped before it)."""
    return window["end"] + WINDOW_GRACE_S - time.time()


def state_too_big(state: Any) -> bool:
    """AWS ends a window whose state outgrows 1 MB early; the window goes on with a fresh state."""
    return len(orjson.dumps(state)) > MAX_WINDOW_STATE_BYTES
