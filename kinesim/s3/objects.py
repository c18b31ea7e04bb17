"""The object store on disk: buckets are directories, objects are plain files.

Layout under `root_dir` (everything kinesim keeps besides the objects' bytes starts with a dot, so it
is never inside a bucket directory that Spark, pandas or `ls` look at):

    <bucket>/<key>                  the object's bytes, a plain file (`key` split on "/")
    .buckets/<bucket>.json          creation date and region of a bucket
    .meta/<bucket>/<hh>/<h>.json    an object's sidecar (h = sha256 of the key): ETag, size, Content-Type,
                                    user metadata, other stored headers, checksums, last modified, and
                                    the data file's (inode, size, mtime) that the sidecar describes
    .meta/<bucket>/<hh>/<h>.data    the bytes of a "directory marker" key (one that ends with "/")
    .uploads/<upload id>/           a multipart upload: upload.json, part-00001 (+ .json), ...
    .tmp/                           bodies being received; moved into place with os.replace

Writes are atomic: a body is written to `.tmp/` (same filesystem) and renamed over the object's
path, so a reader sees the old object, the new one, or none, never a part of one. Renames and
sidecar updates happen under one lock per root; reads take it only when they catch a sidecar that
does not describe the file they opened (a write landed in between) and look again.

A file that appears in a bucket directory without a sidecar (written by Spark, or copied in by
hand) is an object too: its sidecar is made on first sight (ETag = MD5 of the bytes, Content-Type
binary/octet-stream, LastModified = the file's mtime).

Keys that a filesystem cannot hold as S3 does are refused with `InvalidArgument`, before anything
is touched: an empty key or segment ("a//b", "/a"), a "." or ".." segment, NUL or backslash, a
segment over 255 bytes. No key can name a path outside its bucket's directory (checked on the
resolved path too).

Keys that end with "/" ("folder/" markers that consoles and some tools create) are kept: the
directory exists on disk and the marker's bytes (usually none) live beside its sidecar.

S3 lets "a" and "a/b" both exist; a filesystem cannot have a file and a directory of one name.
Such a write is refused with HTTP 409: `ParentIsObject` (putting "a/b" while object "a" exists) or
`ObjectExistsAsDirectory` (putting "a" while keys under "a/" exist).

Durability: a `kill -9` after a 200 loses nothing (the bytes are in the OS); there is no fsync, so a
power cut may lose the latest writes, as with the SQLite store's synchronous=NORMAL.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import BinaryIO, Iterable, Iterator

from .errors import (S3Error, invalid_argument, invalid_bucket_name, malformed_xml, no_such_bucket, no_such_key,
                     no_such_upload, precondition_failed)

CHUNK = 1 << 20
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
# What a bucket lookup accepts (older buckets may have capitals and underscores); never "." or "..".
_BUCKET_LOOKUP = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
_UPLOAD_ID = re.compile(r"[A-Za-z0-9_-]{1,256}")


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


@dataclass
class ObjectMeta:
    """What S3 keeps about an object besides its bytes."""
    key: str
    size: int
    etag: str                          # quoted, as S3 sends it
    last_modified: float               # epoch seconds
    content_type: str = DEFAULT_CONTENT_TYPE
    metadata: dict[str, str] = field(default_factory=dict)  # x-amz-meta-* (names lower case, no prefix)
    headers: dict[str, str] = field(default_factory=dict)   # Cache-Control, Content-Disposition, ... as sent
    checksums: dict[str, str] = field(default_factory=dict)  # algorithm ("CRC32") -> base64 value
    checksum_type: str | None = None   # FULL_OBJECT when `checksums` is set
    parts_count: int | None = None     # set for objects made by a multipart upload
    storage_class: str = "STANDARD"
    file: list[int] = field(default_factory=list)  # [inode, size, mtime_ns] of the data file described

    def describes(self, st: os.stat_result) -> bool:
        return self.file == [st.st_ino, st.st_size, st.st_mtime_ns]


@dataclass
class BucketInfo:
    name: str
    created: float
    region: str


@dataclass
class StagedBody:
    """Bytes received into a temporary file, not yet visible as an object."""
    path: str
    size: int
    md5: bytes

    @property
    def etag(self) -> str:
        return quoted_md5(self.md5)

    def discard(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


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


@dataclass
class ListPage:
    """One page of a listing, in S3's order: `objects` and `common_prefixes` interleave by name."""
    objects: list[ObjectMeta]
    common_prefixes: list[str]
    is_truncated: bool
    last: str | None  # the last key or common prefix of the page (NextMarker / continuation point)


_LOCKS: dict[str, threading.RLock] = {}
_LOCKS_GUARD = threading.Lock()


def _lock_for(root: str) -> threading.RLock:
    # One lock per root directory, shared by every ObjectStore of this process on it (the S3 API's
    # and, say, a delivery stream writer's).
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(root, threading.RLock())


class ObjectStore:
    def __init__(self, root_dir: str, default_region: str = "us-east-1"):
        self.root = os.path.realpath(root_dir)
        self.default_region = default_region
        for sub in (".buckets", ".meta", ".uploads", ".tmp"):
            os.makedirs(os.path.join(self.root, sub), exist_ok=True)
        self._tmp = os.path.join(self.root, ".tmp")
        self._lock = _lock_for(self.root)
        self._remove_stale_temporaries()

    def _remove_stale_temporaries(self) -> None:
        # Bodies a killed server was receiving. Only old ones: another store of this process on
        # the same root may be receiving one right now.
        cutoff = time.time() - 3600
        for entry in os.scandir(self._tmp):
            try:
                if entry.stat().st_mtime < cutoff:
                    os.unlink(entry.path)
            except OSError:
                pass

    # ------------------------------------------------------------------------------------------
    # buckets

    def _bucket_dir(self, name: str) -> str | None:
        """The bucket's directory if the name could be a bucket's (nothing else is looked at)."""
        if not _BUCKET_LOOKUP.fullmatch(name) or ".." in name:
            return None
        return os.path.join(self.root, name)

    def bucket_path(self, name: str) -> str:
        """The bucket's directory, where file:// readers find its objects as plain files."""
        path = self._bucket_dir(name)
        if path is None:
            raise invalid_bucket_name(name)
        return path

    def bucket_exists(self, name: str) -> bool:
        path = self._bucket_dir(name)
        return path is not None and os.path.isdir(path)

    def _require_bucket(self, name: str) -> str:
        path = self._bucket_dir(name)
        if path is None or not os.path.isdir(path):
            raise no_such_bucket(name)
        return path

    def create_bucket(self, name: str, region: str | None = None) -> None:
        """Raises InvalidBucketName, or BucketAlreadyOwnedByYou (409) if it exists."""
        if not valid_bucket_name(name):
            raise invalid_bucket_name(name)
        with self._lock:
            path = os.path.join(self.root, name)
            if os.path.isdir(path):
                raise S3Error("BucketAlreadyOwnedByYou", "Your previous request to create the named bucket "
                              "succeeded and you already own it.", 409, BucketName=name)
            self._write_json(self._bucket_record(name), {"created": time.time(), "region": region or self.default_region})
            os.makedirs(path, exist_ok=True)

    def bucket_info(self, name: str) -> BucketInfo:
        path = self._require_bucket(name)
        record = self._read_json(self._bucket_record(name)) or {}
        created = record.get("created") or os.stat(path).st_mtime
        return BucketInfo(name, created, record.get("region") or self.default_region)

    def list_buckets(self) -> list[BucketInfo]:
        names = sorted(e.name for e in os.scandir(self.root)
                       if e.is_dir() and not e.name.startswith(".") and self._bucket_dir(e.name) is not None)
        infos = []
        for name in names:
            try:
                infos.append(self.bucket_info(name))
            except S3Error:  # deleted meanwhile
                pass
        return infos

    def delete_bucket(self, name: str) -> None:
        """Raises NoSuchBucket, or BucketNotEmpty (409) while it holds an object. Multipart
        uploads in progress are aborted with it."""
        with self._lock:
            path = self._require_bucket(name)
            if self._has_objects(name, path, ""):
                raise S3Error("BucketNotEmpty", "The bucket you tried to delete is not empty", 409, BucketName=name)
            for upload in self.list_multipart_uploads(name):
                shutil.rmtree(self._upload_dir(upload.upload_id), ignore_errors=True)
            shutil.rmtree(path)
            shutil.rmtree(os.path.join(self.root, ".meta", name), ignore_errors=True)
            try:
                os.unlink(self._bucket_record(name))
            except FileNotFoundError:
                pass

    def _bucket_record(self, name: str) -> str:
        return os.path.join(self.root, ".buckets", name + ".json")

    # ------------------------------------------------------------------------------------------
    # paths

    def _data_path(self, bucket: str, bdir: str, key: str) -> str:
        """Where the key's bytes are: its file in the bucket, or beside the sidecar for a marker."""
        segments = check_key(key)
        path = os.path.join(bdir, *segments)
        real = os.path.realpath(path)
        if not real.startswith(os.path.realpath(bdir) + os.sep):
            raise invalid_argument("Object key resolves to a path outside its bucket", "key", key)
        if is_marker(key):
            return self._sidecar(bucket, key)[:-len(".json")] + ".data"
        return path

    def _sidecar(self, bucket: str, key: str) -> str:
        h = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
        return os.path.join(self.root, ".meta", bucket, h[:2], h + ".json")

    @staticmethod
    def _read_json(path: str) -> dict | None:
        try:
            with open(path, "rb") as f:
                return json.loads(f.read())
        except (FileNotFoundError, NotADirectoryError, ValueError):
            return None

    def _write_json(self, path: str, doc: dict) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self._tmp, suffix=".json")
        with os.fdopen(fd, "wb") as f:
            f.write(json.dumps(doc, separators=(",", ":")).encode())
        os.replace(tmp, path)

    # ------------------------------------------------------------------------------------------
    # writing

    def stage(self, data: bytes | BinaryIO, max_size: int | None = None) -> StagedBody:
        """Receive a body into a temporary file (in chunks: a large body never sits in memory)."""
        fd, path = tempfile.mkstemp(dir=self._tmp)
        md5, size = hashlib.md5(), 0
        try:
            with os.fdopen(fd, "wb") as out:
                if isinstance(data, (bytes, bytearray, memoryview)):
                    out.write(data)
                    md5.update(data)
                    size = len(data)
                else:
                    while chunk := data.read(CHUNK):
                        size += len(chunk)
                        if max_size is not None and size > max_size:
                            raise S3Error("EntityTooLarge", "Your proposed upload exceeds the maximum allowed size",
                                          400, MaxSizeAllowed=max_size)
                        out.write(chunk)
                        md5.update(chunk)
        except BaseException:
            os.unlink(path)
            raise
        return StagedBody(path, size, md5.digest())

    def put_object(self, bucket: str, key: str, data: bytes | BinaryIO, content_type: str = DEFAULT_CONTENT_TYPE,
                   metadata: dict[str, str] | None = None) -> str:
        """Store an object; returns its ETag (the quoted MD5 hex of its bytes)."""
        self._require_bucket(bucket)
        check_key(key)
        staged = self.stage(data)
        try:
            return self.commit(bucket, key, staged, content_type=content_type, metadata=metadata).etag
        finally:
            staged.discard()

    def commit(self, bucket: str, key: str, staged: StagedBody, *, content_type: str = DEFAULT_CONTENT_TYPE,
               metadata: dict[str, str] | None = None, headers: dict[str, str] | None = None,
               checksums: dict[str, str] | None = None, etag: str | None = None, parts_count: int | None = None,
               storage_class: str = "STANDARD", if_match: str | None = None,
               if_none_match: bool = False) -> ObjectMeta:
        """Make a staged body the object `key` (atomically). `if_none_match`: only if there is no such
        object (PutObject's `If-None-Match: *`); `if_match`: only if its ETag is this one."""
        meta = ObjectMeta(key=key, size=staged.size, etag=etag or staged.etag, last_modified=time.time(),
                          content_type=content_type or DEFAULT_CONTENT_TYPE, metadata=dict(metadata or {}),
                          headers=dict(headers or {}), checksums=dict(checksums or {}),
                          checksum_type="FULL_OBJECT" if checksums else None, parts_count=parts_count,
                          storage_class=storage_class)
        with self._lock:
            bdir = self._require_bucket(bucket)
            data_path = self._data_path(bucket, bdir, key)
            self._check_conflicts(bdir, key)
            if if_none_match or if_match is not None:
                current = self._lookup(bucket, key, open_file=False, missing_ok=True)[1]
                if if_none_match and current is not None:
                    raise precondition_failed("If-None-Match")
                if if_match is not None:
                    if current is None:
                        raise no_such_key(key)
                    if not etag_matches(if_match, current.etag):
                        raise precondition_failed("If-Match")
            os.makedirs(os.path.dirname(data_path), exist_ok=True)
            if is_marker(key):
                os.makedirs(os.path.join(bdir, *check_key(key)), exist_ok=True)
            st = os.stat(staged.path)
            meta.file = [st.st_ino, st.st_size, st.st_mtime_ns]
            os.replace(staged.path, data_path)
            self._write_json(self._sidecar(bucket, key), asdict(meta))
        return meta

    def _check_conflicts(self, bdir: str, key: str) -> None:
        segments = check_key(key)
        path = bdir
        for segment in segments[:-1] if not is_marker(key) else segments:
            path = os.path.join(path, segment)
            if os.path.lexists(path) and not os.path.isdir(path):
                raise S3Error("ParentIsObject", "Object-prefix is already an object, please choose a different "
                              "object-prefix name.", 409, Key=key)
        if not is_marker(key) and os.path.isdir(os.path.join(bdir, *segments)):
            raise S3Error("ObjectExistsAsDirectory", "Object name already exists as a directory.", 409, Key=key)

    # ------------------------------------------------------------------------------------------
    # reading

    def head_object(self, bucket: str, key: str) -> ObjectMeta:
        """The object's metadata; raises NoSuchBucket / NoSuchKey."""
        return self._lookup(bucket, key, open_file=False)[1]

    def open_object(self, bucket: str, key: str) -> tuple[BinaryIO, ObjectMeta]:
        """An open binary file of the object's bytes and the metadata that describes exactly those
        bytes (a later overwrite does not change what the open file reads). The caller closes it."""
        return self._lookup(bucket, key, open_file=True)

    def get_object(self, bucket: str, key: str) -> tuple[str, ObjectMeta]:
        """The object's file path (for file:// readers) and metadata. The path is replaced, not
        rewritten, by a later put: open it once and read from that handle."""
        bdir = self._require_bucket(bucket)
        meta = self.head_object(bucket, key)
        return self._data_path(bucket, bdir, key), meta

    def _lookup(self, bucket: str, key: str, open_file: bool, missing_ok: bool = False):
        bdir = self._require_bucket(bucket)
        path = self._data_path(bucket, bdir, key)
        for attempt in range(2):
            # A first look without the lock; if the sidecar does not describe the file (a write
            # landed between the two reads, or the file came from outside), look again under it.
            with self._lock if attempt else contextlib.nullcontext():
                f = None
                try:
                    if open_file:
                        f = open(path, "rb")
                        st = os.fstat(f.fileno())
                    else:
                        st = os.stat(path)
                except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                    if missing_ok:
                        return None, None
                    raise no_such_key(key) from None
                if not stat.S_ISREG(st.st_mode):
                    if f:
                        f.close()
                    if missing_ok:
                        return None, None
                    raise no_such_key(key)
                doc = self._read_json(self._sidecar(bucket, key))
                meta = ObjectMeta(**doc) if doc else None
                if meta is not None and meta.describes(st):
                    return f, meta
                if attempt:
                    return f, self._adopt(bucket, key, path, st)
                if f:
                    f.close()
        raise AssertionError("unreachable")

    def _adopt(self, bucket: str, key: str, path: str, st: os.stat_result) -> ObjectMeta:
        """Make the sidecar of a file that was written without one (called under the lock)."""
        md5 = hashlib.md5()
        with open(path, "rb") as f:
            while chunk := f.read(CHUNK):
                md5.update(chunk)
        meta = ObjectMeta(key=key, size=st.st_size, etag=quoted_md5(md5.digest()), last_modified=st.st_mtime,
                          file=[st.st_ino, st.st_size, st.st_mtime_ns])
        self._write_json(self._sidecar(bucket, key), asdict(meta))
        return meta

    # ------------------------------------------------------------------------------------------
    # deleting

    def delete_object(self, bucket: str, key: str) -> None:
        """Remove an object if it exists (S3's DeleteObject succeeds either way). Directories left
        empty are removed, up to the bucket's own."""
        with self._lock:
            bdir = self._require_bucket(bucket)
            path = self._data_path(bucket, bdir, key)
            if is_marker(key):
                if not os.path.exists(self._sidecar(bucket, key)):
                    return
                self._unlink(path)
                self._unlink(self._sidecar(bucket, key))
                self._prune(bucket, bdir, os.path.join(bdir, *check_key(key)))
                return
            if not os.path.isfile(path):
                return
            self._unlink(path)
            self._unlink(self._sidecar(bucket, key))
            self._prune(bucket, bdir, os.path.dirname(path))

    @staticmethod
    def _unlink(path: str) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    def _prune(self, bucket: str, bdir: str, directory: str) -> None:
        while directory != bdir and directory.startswith(bdir + os.sep):
            rel = os.path.relpath(directory, bdir).replace(os.sep, "/")
            if os.path.exists(self._sidecar(bucket, rel + "/")):
                return  # a marker object keeps its directory
            try:
                os.rmdir(directory)
            except OSError:
                return  # not empty
            directory = os.path.dirname(directory)

    # ------------------------------------------------------------------------------------------
    # listing

    def list_objects(self, bucket: str, prefix: str = "", delimiter: str | None = None, after: str = "",
                     max_keys: int = 1000) -> ListPage:
        """Keys (and, with a delimiter, common prefixes) that start with `prefix` and sort after
        `after`, in UTF-8 byte order, at most `max_keys` of both together."""
        bdir = self._require_bucket(bucket)
        entries: dict[str, bool] = {}  # name -> is a common prefix
        for key in self._keys(bucket, bdir, prefix, shallow=delimiter == "/"):
            if not key.startswith(prefix):
                continue
            cut = key.find(delimiter, len(prefix)) if delimiter else -1
            if cut >= 0:
                entries[key[:cut + len(delimiter)]] = True
            else:
                entries[key] = False
        names = sorted(n for n in entries if n > after) if after else sorted(entries)
        page = names[:max_keys]
        objects: list[ObjectMeta] = []
        prefixes: list[str] = []
        for name in page:
            if entries[name]:
                prefixes.append(name)
                continue
            try:
                objects.append(self._lookup(bucket, name, open_file=False)[1])
            except S3Error:  # deleted since the walk
                continue
        return ListPage(objects, prefixes, len(names) > max_keys, page[-1] if page else None)

    def _keys(self, bucket: str, bdir: str, prefix: str, shallow: bool) -> Iterator[str]:
        """Keys that may start with `prefix`, found under the deepest directory `prefix` names.

        `shallow` (delimiter "/"): a subdirectory is not walked; if it holds any object, it comes
        back once as "<dir>/x", which the caller's delimiter cut turns into the common prefix "<dir>/".
        """
        base, rest = prefix[:prefix.rfind("/") + 1], prefix[prefix.rfind("/") + 1:]
        if base:
            try:
                segments = check_key(base)
            except S3Error:
                return
            start = os.path.join(bdir, *segments)
            if self._marker_exists(bucket, base):
                yield base
        else:
            start = bdir
        if not os.path.isdir(start) or os.path.islink(start):
            return
        stack = [(start, base, rest)]
        while stack:
            directory, rel, name_prefix = stack.pop()
            try:
                entries = list(os.scandir(directory))
            except OSError:
                continue
            for entry in entries:
                if not entry.name.startswith(name_prefix):
                    continue
                try:
                    entry.name.encode("utf-8")
                except UnicodeEncodeError:
                    continue  # a file name no S3 key can spell
                key = rel + entry.name
                if entry.is_dir(follow_symlinks=False):
                    if shallow:
                        if self._has_objects(bucket, entry.path, key + "/"):
                            yield key + "/x"
                        continue
                    if self._marker_exists(bucket, key + "/"):
                        yield key + "/"
                    stack.append((entry.path, key + "/", ""))
                elif entry.is_file():
                    yield key

    def _marker_exists(self, bucket: str, key: str) -> bool:
        return os.path.exists(self._sidecar(bucket, key))

    def _has_objects(self, bucket: str, directory: str, rel: str) -> bool:
        for dirpath, dirnames, filenames in os.walk(directory):
            if filenames:
                return True
            sub = os.path.relpath(dirpath, directory).replace(os.sep, "/")
            here = rel if sub == "." else rel + sub + "/"
            if here and self._marker_exists(bucket, here):
                return True
        return False

    # ------------------------------------------------------------------------------------------
    # multipart uploads

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
            raise invalid_argument("Part number must be an integer between 1 and 10000, inclusive",
                                   "partNumber", number)
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
                                  if_match: str | None = None, if_none_match: bool = False) -> ObjectMeta:
        """Join the listed parts (number, ETag) into the object, as S3 checks them: ascending
        numbers, each uploaded with that ETag, every part but the last at least 5 MiB."""
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
                                   parts_count=len(parts), if_match=if_match, if_none_match=if_none_match)
                shutil.rmtree(directory, ignore_errors=True)
        finally:
            staged.discard()
        return meta


def etag_matches(condition: str, etag: str) -> bool:
    """An If-Match / If-None-Match header against an ETag: "*", or a list of (quoted) ETags."""
    if condition.strip() == "*":
        return True
    want = etag.strip('"')
    return any(c.strip().removeprefix("W/").strip('"') == want for c in condition.split(","))


class _Concatenation:
    """The part files one after the other, read like one file."""

    def __init__(self, paths: list[str]):
        self._paths = list(paths)
        self._current: BinaryIO | None = None

    def read(self, size: int = CHUNK) -> bytes:
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


