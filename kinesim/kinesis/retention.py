"""Retention: records older than the stream's retention period are deleted (the store then gives
their space back to the OS).

Reads already hide expired records (they filter on arrival time), so this sweep only frees storage.
"""
from __future__ import annotations

import logging
import threading

from .service import KinesisService

log = logging.getLogger("kinesim.retention")


def sweep(svc: KinesisService) -> int:
    deleted = 0
    for stream in svc.all_streams():
        horizon = svc.retention_horizon(stream)
        with stream.lock:
            # Record the next indexes first: they must outlive the records that proved them.
            svc.save(stream)
            shard_uids = [s.uid for s in stream.shards]
        # Outside the stream's lock, so puts to the stream go on while a large backlog is deleted:
        # a record put from now on arrives after `horizon` and is not touched.
        deleted += svc.store.delete_records(shard_uids, before_arrival=horizon)
    if deleted:
        log.info("retention: deleted %d expired records", deleted)
    return deleted


class Sweeper(threading.Thread):
    def __init__(self, svc: KinesisService, every_s: float):
        super().__init__(name="kinesim-retention", daemon=True)
        self.svc, self.every_s = svc, every_s
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.every_s):
            try:
                sweep(self.svc)
            except Exception:  # a failed sweep must not end the thread; reads stay correct anyway
                log.exception("retention sweep failed")

    def stop(self) -> None:
        self.stopped.set()
