"""S3's rules as the object store applies them: bucket names, object keys (and which of them a
directory tree cannot hold), multipart limits, ETags.

Keys that a filesystem cannot hold as S3 does are refused with `InvalidArgument`, before anything
is touched: an empty key or segment ("a//b", "/a"), a "." or ".." segment, NUL or backslash, a
segment over 255 bytes.
"""
from __future__ import annotations

import hashlib
import re
from typing import Iterable

from .errors import S3Error, invalid_argument

DEFAULT_CONTENT_TYPE = "binary/octet-stream"
MAX_KEY_BYTES = 1024
MAX_SEGMENT_BYTES = 255          # a file name on Linux filesystems
MIN_PART_SIZE = 5 * 1024 * 1024  # every part of a multipart upload but the last
MAX_PARTS = 10_000

# S3's naming rules for new general purpose buckets.
_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_IPV4_LIKE = re.compile(r"\d+\.\d+\.\d+\.\d+")
_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def valid_bucket_name(name: str) -> bool:
    """S3's rules for a new bucket's name."""
    return (_BUCKET_NAME.fullmatch(name) is not None and ".." not in name and not _IPV4_LIKE.fullmatch(name)
            and not name.startswith(_RESERVED_PREFIXES) and not name.endswith(_RESERVED_SUFFIXES))


def check_key(key: str) -> list[str]:
    """The key's path segments (without the trailing "" of a marker key), or the S3 error refusing it."""
    size = len(key.encode("utf-8", "surrogatepass"))
    if size > MAX_KEY_BYTES:
        raise S3Error("KeyTooLongError", "Your key is too long", 400, Size=size, MaxSizeAllowed=MAX_KEY_BYTES)
    reason = None
    if not key:
        reason = "is empty"
    elif "\x00" in key or "\\" in key:
        reason = "contains a NUL or backslash character"
    elif key.startswith("/"):
        reason = "starts with '/'"
    segments = key.split("/")
    if key.endswith("/"):
        segments.pop()
    if reason is None:
        for segment in segments:
            if segment in ("", ".", ".."):
                reason = "has an empty, '.' or '..' path segment"
                break
            if len(segment.encode("utf-8", "surrogatepass")) > MAX_SEGMENT_BYTES:
                reason = f"has a path segment longer than {MAX_SEGMENT_BYTES} bytes"
                break
    if reason is not None:
        raise invalid_argument(f"Object key {reason}: kinesim keeps each object as a file in its bucket's "
                               "directory and cannot store this key", "key", key)
    return segments


def is_marker(key: str) -> bool:
    """A "directory marker" key ("folder/"): its bytes cannot be a file named like the directory."""
    return key.endswith("/")


def quoted_md5(digest: bytes) -> str:
    return f'"{digest.hex()}"'


def multipart_etag(part_etags: Iterable[str], count: int) -> str:
    """S3's ETag of a completed multipart upload: MD5 of the parts' binary MD5s, "-" and the count."""
    joined = b"".join(bytes.fromhex(etag.strip('"')) for etag in part_etags)
    return f'"{hashlib.md5(joined).hexdigest()}-{count}"'


def etag_matches(condition: str, etag: str) -> bool:
    """An If-Match / If-None-Match header against an ETag: "*", or a list of (quoted) ETags."""
    if condition.strip() == "*":
        return True
    want = etag.strip('"')
    return any(c.strip().removeprefix("W/").strip('"') == want for c in condition.split(","))
