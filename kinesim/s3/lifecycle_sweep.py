"""Lifecycle rules applied: a background sweep deletes the objects whose lifecycle Expiration
(Days or Date) has passed and aborts multipart uploads older than their rule's
AbortIncompleteMultipartUpload, as S3 does asynchronously (at most daily there; here every
`SWEEP_INTERVAL_S`).

What S3 would do that is not done: Transitions (kinesim has one storage class on disk) and the
noncurrent-version actions (kinesim keeps no object versions); rules filtering on object tags
take no object (kinesim keeps no object tags).
"""
from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from . import bucket_config
from .errors import S3Error
from .notification_events import WriteOrigin

if TYPE_CHECKING:
    from .objects import ObjectStore

log = logging.getLogger("kinesim.s3.lifecycle")

SWEEP_INTERVAL_S = 60.0
PAGE = 1000


def now() -> float:
    """The sweep's clock (tests replace it to make days pass)."""
    return time.time()


def _expiration_origin() -> WriteOrigin:
    # The event and principal S3's lifecycle deletions are notified with.
    return WriteOrigin(event="LifecycleExpiration:Delete", principal_id="s3.amazonaws.com")


def sweep(store: "ObjectStore") -> int:
    """One pass over every bucket with lifecycle rules; the number of objects and uploads removed."""
    removed = 0
    for info in store.list_buckets():
        try:
            rules = (bucket_config.find(store, info.name, bucket_config.LIFECYCLE) or {}).get("Rules") or []
            if rules:
                removed += _expire_objects(store, info.name, rules) + _abort_uploads(store, info.name, rules)
        except S3Error:  # the bucket went meanwhile
            continue
    return removed


def _expire_objects(store: "ObjectStore", bucket: str, rules: list[dict]) -> int:
    expiring = [r for r in rules if r.get("Status") == "Enabled" and "Expiration" in r]
    if not expiring:
        return 0
    removed, after = 0, ""
    while True:
        page = store.list_objects(bucket, "", None, after, PAGE)
        for obj in page.objects:
            if any(_expired(rule, obj.key, obj.size, obj.last_modified) for rule in expiring):
                try:
                    current = store.head_object(bucket, obj.key)
                except S3Error:
                    continue  # deleted meanwhile
                # Overwritten since the listing: the new object is judged on the next pass.
                if current.last_modified == obj.last_modified:
                    store.delete_object(bucket, obj.key, origin=_expiration_origin())
                    removed += 1
        if not page.is_truncated:
            return removed
        after = page.last


def _expired(rule: dict, key: str, size: int, created: float) -> bool:
    if not bucket_config.matches(rule, key, size):
        return False
    when = bucket_config.expiry(rule, created)
    return when is not None and when <= now()


def _abort_uploads(store: "ObjectStore", bucket: str, rules: list[dict]) -> int:
    aborting = [r for r in rules if r.get("Status") == "Enabled" and "AbortIncompleteMultipartUpload" in r]
    removed = 0
    for upload in store.list_multipart_uploads(bucket) if aborting else []:
        for rule in aborting:
            days = rule["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"]
            if bucket_config.matches(rule, upload.key, 0) \
                    and bucket_config.after_days(upload.initiated, days) <= now():
                try:
                    store.abort_multipart_upload(bucket, upload.key, upload.upload_id)
                    removed += 1
                except S3Error:
                    pass  # completed or aborted meanwhile
                break
    return removed


class LifecycleSweeper:
    """Runs `sweep` every `SWEEP_INTERVAL_S` in a background thread until stopped."""

    def __init__(self, store: "ObjectStore"):
        self.store = store
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kinesim-s3-lifecycle", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(SWEEP_INTERVAL_S):
            try:
                sweep(self.store)
            except Exception:  # a bad pass must not end the sweeps to come
                log.exception("S3 lifecycle sweep failed")
