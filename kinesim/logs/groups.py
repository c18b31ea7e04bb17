"""Log group documents (kind "logs-group" in the store) and the clock they are stamped with."""
from __future__ import annotations

import time
from typing import Any

GROUP_KIND = "logs-group"
DAY_MS = 86_400_000


def now_ms() -> int:
    return int(time.time() * 1000)


def new_group_doc(**extra: Any) -> dict[str, Any]:
    doc = {"creationTime": now_ms(), "retentionInDays": None, "tags": {}, "logGroupClass": "STANDARD",
           "kmsKeyId": None, "deletionProtectionEnabled": False}
    doc.update(extra)
    return doc
