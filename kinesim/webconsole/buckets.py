"""The console's bucket page and overview rows.

GET /api/buckets/NAME?prefix=P&after=K  one level of the bucket under P: its prefixes (folders) and
                                        objects (key, size, last modified), PAGE_SIZE at a time
GET /api/buckets/NAME/preview?key=K     a bounded preview of the object (`object_preview`)
GET /api/buckets/NAME/download?key=K    the object's bytes, as an attachment

Everything is read through the object store's public methods (`list_objects`, `open_object`,
`bucket_info`), which refuse a key that would name a path outside the bucket's directory ("..",
a leading "/"...) with S3's error; a prefix like that lists nothing. A download is always sent as
`application/octet-stream` with `Content-Disposition: attachment`, never with the object's own
Content-Type, and sandboxed: an HTML object must not run as a page of the console's origin.

Bucket names are global, each bucket an account's: the overview lists the selected account's
buckets only, while a bucket's page opens whatever its owner (a delivery stream may write into
another account's bucket, and its page links there); the listing says whose it is ("owner").
"""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from flask import Flask, Response, request, send_file

from ..protocol.errors import AwsError
from .figures import ms, plural, size_text, tree_size
from .http import API, error, reads
from .object_preview import preview
from .pages import PREFIX, SECURITY_HEADERS
from .scope import scope_for

if TYPE_CHECKING:
    from ..edge import Edge
    from ..scope_services import ScopeServices

PAGE_SIZE = 500
SIZE_CACHE_S = 15.0        # how long the overview's bucket sizes are reused
SIZE_WALK_LIMIT = 100_000  # files counted for a bucket's size at most ("100,000+ objects")


def add_routes(app: Flask, edge: "Edge") -> None:
    @app.get(API + "/buckets/<bucket>")
    @reads
    def buckets_listing(bucket: str) -> dict[str, Any]:
        return listing(scope_for(edge, request), bucket, request.args.get("prefix", ""), request.args.get("after", ""))

    @app.get(API + "/buckets/<bucket>/preview")
    @reads
    def buckets_preview(bucket: str) -> dict[str, Any]:
        key = request.args.get("key", "")
        f, meta = scope_for(edge, request).objects.open_object(bucket, key)
        with f:
            found = preview(f, meta.size)
        return {"bucket": bucket, "key": key, "size": meta.size, "content_type": meta.content_type,
                "content_encoding": meta.headers.get("Content-Encoding"), **found}

    @app.get(API + "/buckets/<bucket>/download")
    def buckets_download(bucket: str) -> Response:
        key = request.args.get("key", "")
        try:
            f, meta = scope_for(edge, request).objects.open_object(bucket, key)
        except AwsError as err:
            return error(err.message or err.code, err.status if err.status < 500 else 400, err.code)
        response = send_file(f, mimetype="application/octet-stream", as_attachment=True,
                             download_name=key.rstrip("/").rsplit("/", 1)[-1] or "object", conditional=False,
                             etag=False, max_age=0)
        response.content_length = meta.size
        response.headers.update(SECURITY_HEADERS)
        # An attachment is saved, not shown; were it shown, it would be as S3 shows objects (s3/api.py).
        response.headers["Content-Security-Policy"] = SECURITY_HEADERS["Content-Security-Policy"] + "; sandbox"
        response.headers["Cache-Control"] = "no-store"
        return response


def listing(scope: "ScopeServices", bucket: str, prefix: str, after: str) -> dict[str, Any]:
    objects = scope.objects
    page = objects.list_objects(bucket, prefix=prefix, delimiter="/", after=after, max_keys=PAGE_SIZE)
    info = objects.bucket_info(bucket)
    return {
        "name": bucket, "region": info.region, "owner": getattr(info, "owner", None), "created": ms(info.created),
        "prefix": prefix, "parents": _parents(prefix),
        "prefixes": [{"prefix": p, "name": p[len(prefix):]} for p in page.common_prefixes],
        "objects": [{"key": o.key, "name": o.key[len(prefix):], "size": o.size, "last_modified": ms(o.last_modified),
                     "etag": o.etag, "content_type": o.content_type,
                     "content_encoding": o.headers.get("Content-Encoding")} for o in page.objects],
        "truncated": page.is_truncated, "next_after": page.last if page.is_truncated else None,
        "writers": _writers(scope, bucket),
    }


def _parents(prefix: str) -> list[dict[str, str]]:
    """The breadcrumbs of a prefix: "a/b/c" -> a/, a/b/ (and the part after the last "/")."""
    parts, out, at = prefix.split("/"), [], ""
    for part in parts[:-1]:
        at += part + "/"
        out.append({"name": part + "/", "prefix": at})
    return out


def _writers(scope: "ScopeServices", bucket: str) -> list[dict[str, Any]]:
    """The scope's delivery streams that write into the bucket (as destination, error output or backup)."""
    out = []
    for ds in scope.firehose.all_streams():
        with ds.lock:
            dest = ds.destination
            backup = dest.get("S3BackupDescription") if dest.get("S3BackupMode") == "Enabled" else None
            roles = [role for role, arn in (("destination", dest.get("BucketARN")),
                                            ("backup", backup and backup.get("BucketARN")))
                     if arn and arn.split(":::", 1)[-1] == bucket]
            prefix = dest.get("Prefix") or ""
        if roles:
            out.append({"name": ds.name, "roles": roles, "prefix": prefix})
    return sorted(out, key=lambda w: w["name"])


# ------------------------------------------------------------------ the overview

class _Sizes:
    """Objects and bytes per bucket, counted by walking its directory (links not followed) at most
    every SIZE_CACHE_S, and at most SIZE_WALK_LIMIT files: the overview polls every second or two."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.found: dict[str, tuple[float, int, int, bool]] = {}  # bucket -> (when, objects, bytes, capped)

    def of(self, path: str, bucket: str) -> tuple[int, int, bool]:
        now = time.monotonic()
        with self.lock:
            cached = self.found.get(bucket)
        if cached is not None and now - cached[0] < SIZE_CACHE_S:
            return cached[1:]
        count, size, capped = tree_size(path, SIZE_WALK_LIMIT)
        with self.lock:
            self.found[bucket] = (now, count, size, capped)
        return count, size, capped

    def keep(self, buckets: set[str]) -> None:
        """Forget the buckets that are gone."""
        with self.lock:
            for gone in set(self.found) - buckets:
                del self.found[gone]


_SIZES = _Sizes()


def overview_rows(scope: "ScopeServices") -> dict[str, list[dict[str, Any]]]:
    objects = scope.objects
    writers: dict[str, list[str]] = {}
    for ds in scope.firehose.all_streams():
        writers.setdefault(ds.destination.get("BucketARN", "").split(":::", 1)[-1], []).append(ds.name)
    rows = []
    infos = objects.list_buckets()
    _SIZES.keep({info.name for info in infos})
    for info in owned_by(infos, scope.scope.account):
        count, size, capped = _SIZES.of(objects.bucket_path(info.name), info.name)
        health = f"{count:,}{'+' if capped else ''} {plural(count, 'object')} · {size_text(size)}"
        if writers.get(info.name):
            health += " · written by " + ", ".join(sorted(writers[info.name]))
        rows.append({"name": info.name, "href": f"{PREFIX}/buckets/{quote(info.name, safe='')}", "state": "ok",
                     "health": health, "figures": {"objects": count, "bytes": size}})
    return {"buckets": rows}


def owned_by(infos: list[Any], account: str) -> list[Any]:
    """The buckets of `account`: bucket names are global, but a bucket belongs to one account (all of
    them, when the object store records no owner)."""
    return [info for info in infos if getattr(info, "owner", None) in (None, account)]
