"""The object store on disk: buckets are directories, objects are plain files.

Layout under `root_dir` (everything kinesim keeps besides the objects' bytes starts with a dot, so it
is never inside a bucket directory that Spark, pandas or `ls` look at):

    <bucket>/<key>                  the object's bytes, a plain file (`key` split on "/")
    .buckets/<bucket>.json          creation date, region and owner (account id) of a bucket
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

Keys that a filesystem cannot hold as S3 does are refused with `InvalidArgument` before anything
is touched (`rules.check_key`). No key can name a path outside its bucket's directory: files are reached
through `bucket_files`, which never follows a symbolic link (a link in a bucket is not an object,
and writing through one is refused; its docstring says why).

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
import shutil
import stat
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, BinaryIO, Iterator

from . import bucket_files
from .errors import (S3Error, bucket_already_exists, invalid_argument, invalid_bucket_name, no_such_bucket,
                     no_such_key, precondition_failed)
from .rules import DEFAULT_CONTENT_TYPE, check_key, etag_matches, is_marker, quoted_md5
from .rules import MIN_PART_SIZE, multipart_etag, valid_bucket_name  # noqa: F401 (offered here too)
from .uploads import MultipartUploads

if TYPE_CHECKING:
    from .notification_events import WriteOrigin
    from .notifications import BucketNotifications

CHUNK = 1 << 20
# The owner of a bucket whose record names none (written before buckets had owners): the server's
# account, `Settings.account_id`; this is its default, for a store made without one.
DEFAULT_OWNER = "000000000000"
# What a bucket lookup accepts (older buckets may have capitals and underscores); never "." or "..".
_BUCKET_LOOKUP = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")


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
    part_sizes: list[int] = field(default_factory=list)  # their sizes (GetObject's partNumber)
    storage_class: str = "STANDARD"
    file: list[int] = field(default_factory=list)  # [inode, size, mtime_ns] of the data file described

    def describes(self, st: os.stat_result) -> bool:
        return self.file == [st.st_ino, st.st_size, st.st_mtime_ns]


@dataclass
class BucketInfo:
    name: str
    created: float
    region: str
    owner: str  # the account id that owns it; one namespace of bucket names for every account and region


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


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()  # a bucket's directory may be a link (where the user keeps it) ...
    except OSError:
        return False  # ... but not one that loops


class ObjectStore(MultipartUploads):
    def __init__(self, root_dir: str, default_region: str = "us-east-1", default_owner: str = DEFAULT_OWNER):
        """`default_region`, `default_owner`: what a bucket whose record names no region or owner is
        in and belongs to (a bucket directory made by hand; a data directory older than owners)."""
        self.root = os.path.realpath(root_dir)
        self.default_region = default_region
        self.default_owner = default_owner
        for sub in (".buckets", ".meta", ".uploads", ".tmp"):
            os.makedirs(os.path.join(self.root, sub), exist_ok=True)
        self._tmp = os.path.join(self.root, ".tmp")
        self._lock = _lock_for(self.root)
        # S3 event notifications, attached by the server: told of each write and delete inside it,
        # so that what they record is recorded before the write is answered.
        self.notifications: BucketNotifications | None = None
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

    @staticmethod
    def key_problem(key: str) -> str | None:
        """Why this store cannot hold `key` (the message of its error for it), None if it can: for
        a service that makes keys (Firehose) to check what it will write."""
        try:
            check_key(key)
        except S3Error as err:
            return err.message
        return None

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

    def create_bucket(self, name: str, region: str | None = None, owner: str | None = None) -> None:
        """A bucket of account `owner` (None: the default owner). Bucket names are one namespace
        for every account: raises InvalidBucketName, or 409 if the name is taken:
        BucketAlreadyOwnedByYou by `owner` itself, BucketAlreadyExists by another account."""
        if not valid_bucket_name(name):
            raise invalid_bucket_name(name)
        owner = owner or self.default_owner
        with self._lock:
            path = os.path.join(self.root, name)
            if os.path.isdir(path):
                if self.bucket_info(name).owner != owner:
                    raise bucket_already_exists(name)
                raise S3Error("BucketAlreadyOwnedByYou", "Your previous request to create the named bucket "
                              "succeeded and you already own it.", 409, BucketName=name)
            self._write_json(self._bucket_record(name),
                             {"created": time.time(), "region": region or self.default_region, "owner": owner})
            os.makedirs(path, exist_ok=True)

    def bucket_info(self, name: str) -> BucketInfo:
        path = self._require_bucket(name)
        record = self._read_json(self._bucket_record(name)) or {}
        created = record.get("created") or os.stat(path).st_mtime
        return BucketInfo(name, created, record.get("region") or self.default_region,
                          record.get("owner") or self.default_owner)

    def bucket_configuration(self, name: str) -> dict | None:
        """The bucket's configuration documents by kind (`bucket_config`), kept in its record and so
        deleted with it; None for a bucket whose configuration was never changed. NoSuchBucket."""
        self._require_bucket(name)
        return (self._read_json(self._bucket_record(name)) or {}).get("configuration")

    def update_bucket_configuration(self, name: str, change) -> dict:
        """Replace the bucket's configuration by `change(current)` (None: never changed), atomically."""
        with self._lock:
            path = self._require_bucket(name)
            record = self._read_json(self._bucket_record(name)) or {"created": os.stat(path).st_mtime,
                                                                    "region": self.default_region}
            record["configuration"] = change(record.get("configuration"))
            self._write_json(self._bucket_record(name), record)
            return record["configuration"]

    def list_buckets(self) -> list[BucketInfo]:
        names = sorted(e.name for e in os.scandir(self.root)
                       if not e.name.startswith(".") and self._bucket_dir(e.name) is not None and _is_dir(e))
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
            if self._has_objects(name, path, [], ""):
                raise S3Error("BucketNotEmpty", "The bucket you tried to delete is not empty", 409, BucketName=name)
            for upload in self.list_multipart_uploads(name):
                shutil.rmtree(self._upload_dir(upload.upload_id), ignore_errors=True)
            if os.path.islink(path):
                os.unlink(path)  # a bucket kept elsewhere by the user: its directory is theirs
            else:
                shutil.rmtree(path)  # never follows a link inside it
            shutil.rmtree(os.path.join(self.root, ".meta", name), ignore_errors=True)
            try:
                os.unlink(self._bucket_record(name))
            except FileNotFoundError:
                pass
            if self.notifications is not None:
                self.notifications.bucket_deleted(name)

    def _bucket_record(self, name: str) -> str:
        return os.path.join(self.root, ".buckets", name + ".json")

    # ------------------------------------------------------------------------------------------
    # paths

    def _data_path(self, bucket: str, bdir: str, key: str) -> str:
        """Where the key's bytes are: its file in the bucket, or beside the sidecar for a marker.
        A path to hand to file:// readers; kinesim itself opens bucket files with `bucket_files`."""
        segments = check_key(key)
        if is_marker(key):
            return self._marker_data(bucket, key)
        return os.path.join(bdir, *segments)

    def _marker_data(self, bucket: str, key: str) -> str:
        return self._sidecar(bucket, key)[:-len(".json")] + ".data"

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
                   metadata: dict[str, str] | None = None, origin: WriteOrigin | None = None) -> str:
        """Store an object; returns its ETag (the quoted MD5 hex of its bytes). `origin`: what its
        event notification says (default: an s3:ObjectCreated:Put from inside kinesim)."""
        self._require_bucket(bucket)
        check_key(key)
        staged = self.stage(data)
        try:
            return self.commit(bucket, key, staged, content_type=content_type, metadata=metadata, origin=origin).etag
        finally:
            staged.discard()

    def commit(self, bucket: str, key: str, staged: StagedBody, *, content_type: str = DEFAULT_CONTENT_TYPE,
               metadata: dict[str, str] | None = None, headers: dict[str, str] | None = None,
               checksums: dict[str, str] | None = None, etag: str | None = None,
               part_sizes: list[int] | None = None, storage_class: str = "STANDARD", if_match: str | None = None,
               if_none_match: bool = False, origin: WriteOrigin | None = None) -> ObjectMeta:
        """Make a staged body the object `key` (atomically). `if_none_match`: only if there is no such
        object (PutObject's `If-None-Match: *`); `if_match`: only if its ETag is this one.
        `part_sizes`: the parts' sizes of an object a multipart upload made. `origin`: the event
        (ObjectCreated:Put when None) and request its notifications name."""
        meta = ObjectMeta(key=key, size=staged.size, etag=etag or staged.etag, last_modified=time.time(),
                          content_type=content_type or DEFAULT_CONTENT_TYPE, metadata=dict(metadata or {}),
                          headers=dict(headers or {}), checksums=dict(checksums or {}),
                          checksum_type="FULL_OBJECT" if checksums else None,
                          parts_count=len(part_sizes) if part_sizes else None, part_sizes=list(part_sizes or []),
                          storage_class=storage_class)
        with self._lock:
            bdir = self._require_bucket(bucket)
            segments = check_key(key)
            parents = segments if is_marker(key) else segments[:-1]
            self._check_conflicts(bdir, key, segments, parents)
            if if_none_match or if_match is not None:
                current = self._lookup(bucket, key, open_file=False, missing_ok=True)[1]
                if if_none_match and current is not None:
                    raise precondition_failed("If-None-Match")
                if if_match is not None:
                    if current is None:
                        raise no_such_key(key)
                    if not etag_matches(if_match, current.etag):
                        raise precondition_failed("If-Match")
            st = os.stat(staged.path)
            meta.file = [st.st_ino, st.st_size, st.st_mtime_ns]
            parent = self._open_parent(bdir, key, parents, create=True)
            try:
                if is_marker(key):
                    data_path = self._marker_data(bucket, key)
                    os.makedirs(os.path.dirname(data_path), exist_ok=True)
                    os.replace(staged.path, data_path)
                else:  # replaces a link of that name itself, never what it points to
                    os.replace(staged.path, segments[-1], dst_dir_fd=parent)
            finally:
                os.close(parent)
            self._write_json(self._sidecar(bucket, key), asdict(meta))
            if self.notifications is not None:
                self.notifications.object_created(bucket, key, meta.size, meta.etag, origin)
        return meta

    def _check_conflicts(self, bdir: str, key: str, segments: list[str], parents: list[str]) -> None:
        try:
            parent = self._open_parent(bdir, key, parents, create=False)
        except FileNotFoundError:
            return  # the write makes the missing directories
        try:
            if not is_marker(key) and bucket_files.is_directory_at(parent, segments[-1]):
                raise S3Error("ObjectExistsAsDirectory", "Object name already exists as a directory.", 409, Key=key)
        finally:
            os.close(parent)

    @staticmethod
    def _open_parent(bdir: str, key: str, parents: list[str], create: bool) -> int:
        """A descriptor of the directory a write of `key` goes to, or S3's error for what is in the way."""
        try:
            return bucket_files.open_directory(bdir, parents, create)
        except bucket_files.LinkInPath:
            raise invalid_argument("Object key passes through a symbolic link in its bucket's directory, which "
                                   "kinesim never follows", "key", key) from None
        except NotADirectoryError:
            raise S3Error("ParentIsObject", "Object-prefix is already an object, please choose a different "
                          "object-prefix name.", 409, Key=key) from None

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
        found = self._find(bucket, bdir, key, check_key(key), open_file)
        if found is None:
            if missing_ok:
                return None, None
            raise no_such_key(key)
        return found

    def _find(self, bucket: str, bdir: str, key: str, segments: list[str],
              open_file: bool) -> tuple[BinaryIO | None, ObjectMeta] | None:
        for attempt in range(2):
            # A first look without the lock; if the sidecar does not describe the file (a write
            # landed between the two reads, or the file came from outside), look again under it.
            with self._lock if attempt else contextlib.nullcontext():
                if open_file:
                    f = self._open_data(bucket, bdir, key, segments)
                    st = os.fstat(f.fileno()) if f else None
                else:
                    f, st = None, self._stat_data(bucket, bdir, key, segments)
                if st is None:
                    return None
                doc = self._read_json(self._sidecar(bucket, key))
                meta = ObjectMeta(**doc) if doc else None
                if meta is not None and meta.describes(st):
                    return f, meta
                if attempt:
                    meta = self._adopt(bucket, bdir, key, segments, f)
                    return (f, meta) if meta is not None else None
                if f:
                    f.close()
        raise AssertionError("unreachable")

    def _open_data(self, bucket: str, bdir: str, key: str, segments: list[str]) -> BinaryIO | None:
        """The key's bytes open for reading, None when there are none."""
        if not is_marker(key):
            return bucket_files.open_file(bdir, segments)
        try:  # kinesim's own file, beside the sidecar
            return open(self._marker_data(bucket, key), "rb")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None

    def _stat_data(self, bucket: str, bdir: str, key: str, segments: list[str]) -> os.stat_result | None:
        if not is_marker(key):
            return bucket_files.stat_file(bdir, segments)
        try:
            st = os.stat(self._marker_data(bucket, key))
        except (FileNotFoundError, NotADirectoryError):
            return None
        return st if stat.S_ISREG(st.st_mode) else None

    def _adopt(self, bucket: str, bdir: str, key: str, segments: list[str], f: BinaryIO | None) -> ObjectMeta | None:
        """Make the sidecar of a file that was written without one (called under the lock) from the
        bytes of `f`, or of the file opened anew; None if it is gone."""
        source = f or self._open_data(bucket, bdir, key, segments)
        if source is None:
            return None
        try:
            st = os.fstat(source.fileno())
            md5 = hashlib.md5()
            while chunk := source.read(CHUNK):
                md5.update(chunk)
            source.seek(0)
        finally:
            if f is None:
                source.close()
        meta = ObjectMeta(key=key, size=st.st_size, etag=quoted_md5(md5.digest()), last_modified=st.st_mtime,
                          file=[st.st_ino, st.st_size, st.st_mtime_ns])
        self._write_json(self._sidecar(bucket, key), asdict(meta))
        return meta

    # ------------------------------------------------------------------------------------------
    # deleting

    def delete_object(self, bucket: str, key: str, origin: WriteOrigin | None = None,
                      notify_missing: bool = False) -> None:
        """Remove an object if it exists (S3's DeleteObject succeeds either way). Directories left
        empty are removed, up to the bucket's own. An s3:ObjectRemoved:Delete notification is
        recorded when an object was removed, or always with `notify_missing` (DeleteObjects: S3
        notifies for keys that were not there too, as LocalStack's provider records)."""
        with self._lock:
            bdir = self._require_bucket(bucket)
            removed = self._remove(bucket, bdir, key)
            if self.notifications is not None and (removed or notify_missing):
                self.notifications.object_removed(bucket, key, origin)

    def _remove(self, bucket: str, bdir: str, key: str) -> bool:
        segments = check_key(key)
        if is_marker(key):
            if not os.path.exists(self._sidecar(bucket, key)):
                return False
            self._unlink(self._marker_data(bucket, key))
            self._unlink(self._sidecar(bucket, key))
            self._prune(bucket, bdir, os.path.join(bdir, *segments))
            return True
        if bucket_files.stat_file(bdir, segments) is None:
            return False  # no such object (a link of that name is not one, and stays)
        bucket_files.remove_file(bdir, segments)
        self._unlink(self._sidecar(bucket, key))
        self._prune(bucket, bdir, os.path.join(bdir, *segments[:-1]))
        return True

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
        # max-keys=0 asks for nothing and is answered as complete (no continuation token): what
        # S3 answers, as emulators tested against it record (versitygw#248).
        return ListPage(objects, prefixes, max_keys > 0 and len(names) > max_keys, page[-1] if page else None)

    def _keys(self, bucket: str, bdir: str, prefix: str, shallow: bool) -> Iterator[str]:
        """Keys that may start with `prefix`, found under the deepest directory `prefix` names
        (links are not followed: see `bucket_files`).

        `shallow` (delimiter "/"): a subdirectory is not walked; if it holds any object, it comes
        back once as "<dir>/x", which the caller's delimiter cut turns into the common prefix "<dir>/".
        """
        base, rest = prefix[:prefix.rfind("/") + 1], prefix[prefix.rfind("/") + 1:]
        segments: list[str] = []
        if base:
            try:
                segments = check_key(base)
            except S3Error:
                return
            if self._marker_exists(bucket, base):
                yield base
        stack = [(segments, base, rest)]
        while stack:
            here, rel, name_prefix = stack.pop()
            for name, is_dir in bucket_files.entries(bdir, here):
                if not name.startswith(name_prefix):
                    continue
                try:
                    name.encode("utf-8")
                except UnicodeEncodeError:
                    continue  # a file name no S3 key can spell
                key = rel + name
                if not is_dir:
                    yield key
                elif shallow:
                    if self._has_objects(bucket, bdir, here + [name], key + "/"):
                        yield key + "/x"
                else:
                    if self._marker_exists(bucket, key + "/"):
                        yield key + "/"
                    stack.append((here + [name], key + "/", ""))

    def _marker_exists(self, bucket: str, key: str) -> bool:
        return os.path.exists(self._sidecar(bucket, key))

    def _has_objects(self, bucket: str, bdir: str, segments: list[str], rel: str) -> bool:
        """Whether the directory `segments` of the bucket (key prefix `rel`) holds an object."""
        stack = [(segments, rel)]
        while stack:
            here, prefix = stack.pop()
            if prefix and self._marker_exists(bucket, prefix):
                return True
            for name, is_dir in bucket_files.entries(bdir, here):
                if not is_dir:
                    return True
                stack.append((here + [name], prefix + name + "/"))
        return False
