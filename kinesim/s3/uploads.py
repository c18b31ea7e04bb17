"""Multipart uploads in progress, kept under `.uploads/<upload id>/` of the store's root: the
upload's description (upload.json) and each part's bytes and description (part-00001, .json).

`MultipartUploads` is a part of `objects.ObjectStore` (mixed into it), kept here because it is a
concern of its own. It uses the store's `root`, `_lock`, `_require_bucket`, `_read_json`,
`_write_json`, `stage` and `commit`.
"""
from __future__ import annotations

import os
import re
import secrets
import shutil
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

from .errors import S3Error, invalid_part_number, malformed_xml, no_such_upload
from .rules import DEFAULT_CONTENT_TYPE, MAX_PARTS, MIN_PART_SIZE, check_key, multipart_etag

if TYPE_CHECKING:
    from .objects import ObjectMeta, StagedBody

_UPLOAD_ID = re.compile(r"[A-Za-z0-9_-]{1,256}")


@dataclass
class Upload:
    """A multipart upload in progress."""
    upload_id: str
    bucket: str
    key: str
    initiated: float
    content_type: str = DEFAULT_CONTENT_TYPE
    metadata: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    storage_class: str = "STANDARD"
    checksum_algorithm: str | None = None
    checksum_type: str | None = None


@dataclass
class Part:
    number: int
    etag: str
    size: int
    last_modified: float
    checksums: dict[str, str] = field(default_factory=dict)


class MultipartUploads:
    """CreateMultipartUpload ... CompleteMultipartUpload on the store (see the module docstring)."""

    def _upload_dir(self, upload_id: str) -> str:
        return os.path.join(self.root, ".uploads", upload_id)

    def create_multipart_upload(self, bucket: str, key: str, content_type: str = DEFAULT_CONTENT_TYPE,
                                metadata: dict[str, str] | None = None, headers: dict[str, str] | None = None,
                                storage_class: str = "STANDARD", checksum_algorithm: str | None = None,
                                checksum_type: str | None = None) -> Upload:
        self._require_bucket(bucket)
        check_key(key)
        upload = Upload(secrets.token_urlsafe(48), bucket, key, time.time(), content_type or DEFAULT_CONTENT_TYPE,
                        dict(metadata or {}), dict(headers or {}), storage_class, checksum_algorithm, checksum_type)
        os.makedirs(self._upload_dir(upload.upload_id))
        self._write_json(os.path.join(self._upload_dir(upload.upload_id), "upload.json"), asdict(upload))
        return upload

    def get_upload(self, bucket: str, key: str, upload_id: str) -> Upload:
        """The upload, if it exists and is for this bucket and key; NoSuchUpload otherwise."""
        self._require_bucket(bucket)
        doc = self._read_json(os.path.join(self._upload_dir(upload_id), "upload.json")) \
            if _UPLOAD_ID.fullmatch(upload_id) else None
        if doc is None or doc["bucket"] != bucket or doc["key"] != key:
            raise no_such_upload(upload_id)
        return Upload(**doc)

    def upload_part(self, bucket: str, key: str, upload_id: str, number: int, staged: StagedBody,
                    checksums: dict[str, str] | None = None) -> Part:
        """Keep a staged body as part `number` (replacing an earlier upload of that number)."""
        if not 1 <= number <= MAX_PARTS:
            raise invalid_part_number(number)
        with self._lock:
            self.get_upload(bucket, key, upload_id)
            part = Part(number, staged.etag, staged.size, time.time(), dict(checksums or {}))
            base = os.path.join(self._upload_dir(upload_id), f"part-{number:05d}")
            os.replace(staged.path, base)
            self._write_json(base + ".json", asdict(part))
        return part

    def list_parts(self, bucket: str, key: str, upload_id: str) -> list[Part]:
        self.get_upload(bucket, key, upload_id)
        parts = []
        directory = self._upload_dir(upload_id)
        for name in sorted(os.listdir(directory)):
            if name.startswith("part-") and name.endswith(".json"):
                doc = self._read_json(os.path.join(directory, name))
                if doc:
                    parts.append(Part(**doc))
        return parts

    def list_multipart_uploads(self, bucket: str) -> list[Upload]:
        """The bucket's uploads in progress, by key then initiation time."""
        self._require_bucket(bucket)
        uploads = []
        for entry in os.scandir(os.path.join(self.root, ".uploads")):
            doc = self._read_json(os.path.join(entry.path, "upload.json"))
            if doc and doc["bucket"] == bucket:
                uploads.append(Upload(**doc))
        return sorted(uploads, key=lambda u: (u.key, u.initiated))

    def abort_multipart_upload(self, bucket: str, key: str, upload_id: str) -> None:
        with self._lock:
            self.get_upload(bucket, key, upload_id)
            shutil.rmtree(self._upload_dir(upload_id), ignore_errors=True)

    def complete_multipart_upload(self, bucket: str, key: str, upload_id: str, parts: list[tuple[int, str]],
                                  if_match: str | None = None, if_none_match: bool = False,
                                  origin: Any = None) -> ObjectMeta:
        """Join the listed parts (number, ETag) into the object, as S3 checks them: ascending
        numbers, each uploaded with that ETag, every part but the last at least 5 MiB. `origin`:
        what the object's event notification says (`commit`'s)."""
        upload = self.get_upload(bucket, key, upload_id)
        if not parts:
            raise malformed_xml()
        stored = {p.number: p for p in self.list_parts(bucket, key, upload_id)}
        previous = 0
        for number, etag in parts:
            if number <= previous:
                raise S3Error("InvalidPartOrder", "The list of parts was not in ascending order. Parts must be "
                              "ordered by part number.", 400, UploadId=upload_id)
            previous = number
            part = stored.get(number)
            if part is None or part.etag.strip('"').lower() != etag.strip().strip('"').lower():
                raise S3Error("InvalidPart", "One or more of the specified parts could not be found.  The part may "
                              "not have been uploaded, or the specified entity tag may not match the part's "
                              "entity tag.", 400, UploadId=upload_id, PartNumber=number, ETag=etag)
        for number, etag in parts[:-1]:
            if stored[number].size < MIN_PART_SIZE:
                raise S3Error("EntityTooSmall", "Your proposed upload is smaller than the minimum allowed object "
                              "size.", 400, ProposedSize=stored[number].size, MinSizeAllowed=MIN_PART_SIZE,
                              PartNumber=number, ETag=stored[number].etag)
        directory = self._upload_dir(upload_id)
        try:
            staged = self.stage(_Concatenation([os.path.join(directory, f"part-{n:05d}") for n, _ in parts]))
        except FileNotFoundError:  # aborted meanwhile
            raise no_such_upload(upload_id) from None
        try:
            with self._lock:
                self.get_upload(bucket, key, upload_id)
                meta = self.commit(bucket, key, staged, content_type=upload.content_type, metadata=upload.metadata,
                                   headers=upload.headers, storage_class=upload.storage_class,
                                   etag=multipart_etag((stored[n].etag for n, _ in parts), len(parts)),
                                   part_sizes=[stored[n].size for n, _ in parts], if_match=if_match,
                                   if_none_match=if_none_match, origin=origin)
                shutil.rmtree(directory, ignore_errors=True)
        finally:
            staged.discard()
        return meta


class _Concatenation:
    """The part files one after the other, read like one file."""

    def __init__(self, paths: list[str]):
        self._paths = list(paths)
        self._current: BinaryIO | None = None

    def read(self, size: int = 1 << 20) -> bytes:
        while True:
            if self._current is None:
                if not self._paths:
                    return b""
                self._current = open(self._paths.pop(0), "rb")
            chunk = self._current.read(size)
            if chunk:
                return chunk
            self._current.close()
            self._current = None
