"""A delivery stream as it is stored (shared by the service and its operation modules)."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class DeliveryStream:
    """One delivery stream as it is stored. `destination` is kept in the form AWS describes it
    (ExtendedS3DestinationDescription, defaults filled in); `source` is the Kinesis source
    (KinesisStreamARN, RoleARN, DeliveryStartTimestamp) or None for DirectPut."""
    name: str
    arn: str
    type: str
    created: float
    destination: dict[str, Any]
    status: str = "CREATING"
    ready_at: float = 0.0          # when CREATING becomes ACTIVE / DELETING disappears (applied lazily)
    version: int = 1
    updated: float | None = None
    source: dict[str, Any] | None = None
    encryption: dict[str, Any] = field(default_factory=lambda: {"Status": "DISABLED"})
    tags: dict[str, str] = field(default_factory=dict)
    # Guards the fields above against a concurrent UpdateDestination while a worker reads them.
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    def to_doc(self) -> dict[str, Any]:
        return {"name": self.name, "arn": self.arn, "type": self.type, "created": self.created,
                "destination": self.destination, "status": self.status, "ready_at": self.ready_at,
                "version": self.version, "updated": self.updated, "source": self.source,
                "encryption": self.encryption, "tags": self.tags}

    @classmethod
    def from_doc(cls, d: dict[str, Any]) -> "DeliveryStream":
        return cls(**d)
