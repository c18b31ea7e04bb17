"""Object operations: PutObject, GetObject, HeadObject, DeleteObject, DeleteObjects, CopyObject."""
from __future__ import annotations

import functools
import re
from typing import BinaryIO, Iterator
from urllib.parse import unquote

from ..protocol.models import service_model
from . import bucket_config
from .errors import S3Error, invalid_argument, invalid_request, malformed_xml, precondition_failed
from .exchange import Request, Response, not_implemented, xml_response
from .notification_ops import origin
from .objects import ObjectMeta, StagedBody
from .payload import checksum_header
from .rules import DEFAULT_CONTENT_TYPE, check_key, etag_matches
from .xmldoc import document, element, http_date, iso8601, parse_http_date

MAX_PUT_SIZE = 5 * 1024 ** 3          # one PutObject / UploadPart
MAX_METADATA_SIZE = 2 * 1024          # user metadata, names and values together
MAX_DELETE_KEYS = 1000
# Headers S3 keeps with an object and returns on GET/HEAD.
STORED_HEADERS = ("Cache-Control", "Content-Disposition", "Content-Encoding", "Content-Language", "Expires",
                  "x-amz-website-redirect-location")
# GetObject's query parameters that override a stored header in the response.
RESPONSE_OVERRIDES = {"response-cache-control": "Cache-Control", "response-content-disposition": "Content-Disposition",
                      "response-content-encoding": "Content-Encoding", "response-content-language": "Content-Language",
                      "response-content-type": "Content-Type", "response-expires": "Expires"}
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


@functools.cache
def storage_classes() -> frozenset[str]:
    model = service_model("s3")
    return frozenset(model.shape_for("StorageClass").enum)


# ---------------------------------------------------------------------------------------------
# what a write request says about the object


def stored_headers(req: Request) -> dict[str, str]:
    headers = {name: value for name in STORED_HEADERS if (value := req.header(name)) is not None}
    if "Content-Encoding" in headers:
        # aws-chunked describes the request, not the object: S3 drops it.
        kept = [c.strip() for c in headers["Content-Encoding"].split(",") if c.strip().lower() != "aws-chunked"]
        if kept:
            headers["Content-Encoding"] = ",".join(kept)
        else:
            del headers["Content-Encoding"]
    return headers


def user_metadata(req: Request) -> dict[str, str]:
    metadata = req.headers_with_prefix("x-amz-meta-")
    size = sum(len(k) + len(v) for k, v in metadata.items())
    if size > MAX_METADATA_SIZE:
        raise S3Error("MetadataTooLarge", "Your metadata headers exceed the maximum allowed metadata size", 400,
                      Size=size, MaxSizeAllowed=MAX_METADATA_SIZE)
    return metadata


def storage_class(req: Request, default: str = "STANDARD") -> str:
    value = req.header("x-amz-storage-class")
    if value is None:
        return default
    if value not in storage_classes():
        raise S3Error("InvalidStorageClass", "The storage class you specified is not valid", 400,
                      StorageClassRequested=value)
    return value


def write_conditions(req: Request) -> tuple[str | None, bool]:
    """PutObject's / CompleteMultipartUpload's If-Match (an ETag) and If-None-Match (only "*")."""
    if_none_match = req.header("If-None-Match")
    if if_none_match is not None and if_none_match.strip() != "*":
        raise not_implemented("If-None-Match")
    return req.header("If-Match"), if_none_match is not None


def receive_body(req: Request) -> tuple[StagedBody, dict[str, str]]:
    """Read the request's body into a staged file and run S3's checks on it; returns the staged
    body (the caller commits or discards it) and the flexible checksum sent, if any."""
    chunked = req.framed.left is None
    if req.header("Content-Length") is None and not chunked:
        raise S3Error("MissingContentLength", "You must provide the Content-Length HTTP header.", 411)
    if not chunked and req.framed.left > MAX_PUT_SIZE:
        raise S3Error("EntityTooLarge", "Your proposed upload exceeds the maximum allowed size", 400,
                      ProposedSize=req.framed.left, MaxSizeAllowed=MAX_PUT_SIZE)
    body = req.body()
    staged = req.objects.stage(body, max_size=MAX_PUT_SIZE)
    try:
        return staged, body.verify(staged.md5)
    except BaseException:
        staged.discard()
        raise


def encryption(req: Request) -> dict[str, str]:
    """The server-side encryption recorded with an object this request writes (the request's, else
    the bucket's default), kept with its stored headers and answered as S3 answers it. The bytes on
    disk are not encrypted."""
    return bucket_config.encryption_headers(req.objects, req.bucket, req.header("x-amz-server-side-encryption"),
                                            req.header("x-amz-server-side-encryption-aws-kms-key-id"))


def encryption_of(meta: ObjectMeta) -> list[tuple[str, str]]:
    """An object's encryption headers; AES256 for one written without any (by Firehose, by hand):
    every S3 object is encrypted, SSE-S3 by default."""
    found = [(name, value) for name, value in meta.headers.items() if name.startswith("x-amz-server-side-encryption")]
    return found or [("x-amz-server-side-encryption", "AES256")]


def expiration(req: Request, meta: ObjectMeta) -> list[tuple[str, str]]:
    """`x-amz-expiration` when a lifecycle rule of the bucket will expire the object."""
    value = bucket_config.expiration_header(req.objects, req.bucket, meta.key, meta.size, meta.last_modified)
    return [("x-amz-expiration", value)] if value else []


def checksum_headers(checksums: dict[str, str]) -> list[tuple[str, str]]:
    headers = [(checksum_header(algorithm), value) for algorithm, value in checksums.items()]
    return headers + [("x-amz-checksum-type", "FULL_OBJECT")] if headers else []


# ---------------------------------------------------------------------------------------------
# PutObject, DeleteObject, DeleteObjects


def put_object(req: Request) -> Response:
    req.objects.bucket_info(req.bucket)  # NoSuchBucket before a byte of the body is read
    check_key(req.key)
    if_match, if_none_match = write_conditions(req)
    content_type = req.header("Content-Type") or DEFAULT_CONTENT_TYPE
    metadata, headers, klass = user_metadata(req), stored_headers(req) | encryption(req), storage_class(req)
    staged, checksums = receive_body(req)
    try:
        meta = req.objects.commit(req.bucket, req.key, staged, content_type=content_type, metadata=metadata,
                                  headers=headers, checksums=checksums, storage_class=klass, if_match=if_match,
                                  if_none_match=if_none_match, origin=origin(req, "ObjectCreated:Put"))
    finally:
        staged.discard()
    return Response(200, [("ETag", meta.etag)] + checksum_headers(meta.checksums) + encryption_of(meta)
                    + expiration(req, meta))


def delete_object(req: Request) -> Response:
    # Succeeds whether or not the key existed; notifies only when an object was removed.
    req.objects.delete_object(req.bucket, req.key, origin(req, "ObjectRemoved:Delete"))
    return Response(204)


def delete_objects(req: Request) -> Response:
    req.objects.bucket_info(req.bucket)
    root = req.xml_body()
    if root.tag != "Delete":
        raise malformed_xml()
    quiet = (root.findtext("Quiet") or "false").strip().lower() == "true"
    items = root.findall("Object")
    if not items or len(items) > MAX_DELETE_KEYS:
        raise malformed_xml()
    keys = [item.findtext("Key") for item in items]
    if any(key is None for key in keys):
        raise malformed_xml()
    versions = [item.findtext("VersionId") for item in items]
    result = document("DeleteResult")
    removal = origin(req, "ObjectRemoved:Delete")
    for key, version in zip(keys, versions):
        if version not in (None, "null"):  # no object here has a version but "null"
            node = element(result, "Error")
            element(node, "Key", key)
            element(node, "VersionId", version)
            element(node, "Code", "NoSuchVersion")
            element(node, "Message", "The specified version does not exist.")
            continue
        try:
            req.objects.delete_object(req.bucket, key, removal, notify_missing=True)
        except S3Error as err:
            node = element(result, "Error")
            element(node, "Key", key)
            element(node, "Code", err.code)
            element(node, "Message", err.message)
            continue
        if not quiet:
            deleted = element(result, "Deleted")
            element(deleted, "Key", key)
            if version is not None:
                element(deleted, "VersionId", version)
    return xml_response(result)


# ---------------------------------------------------------------------------------------------
# GetObject, HeadObject


def get_object(req: Request, head: bool = False) -> Response:
    part = req.part_number()
    if part is not None and req.header("Range"):
        raise invalid_request("Cannot specify both Range header and partNumber query parameter")
    f, meta = req.objects.open_object(req.bucket, req.key)
    try:
        not_modified = read_conditions(req, meta)
        if not_modified is not None:
            f.close()
            return not_modified
        headers = object_headers(req, meta)
        status, start, length = 200, 0, meta.size
        byte_range = part_range(meta, part) if part is not None else parse_range(req.header("Range"), meta.size)
        if byte_range is not None:
            start, end = byte_range
            status, length = 206, end - start + 1
            headers.append(("Content-Range", f"bytes {start}-{end}/{meta.size}"))
        if part is not None and meta.parts_count:
            headers.append(("x-amz-mp-parts-count", str(meta.parts_count)))
        whole = byte_range is None or (part is not None and not meta.parts_count)
        if whole and req.header("x-amz-checksum-mode", "").upper() == "ENABLED":
            headers += checksum_headers(meta.checksums)  # only for the whole object, as S3
        if head:
            f.close()
            return Response(status, headers, b"", length)
        return Response(status, headers, _read_file(f, start, length), length)
    except BaseException:
        f.close()
        raise


def head_object(req: Request) -> Response:
    return get_object(req, head=True)


def object_headers(req: Request, meta: ObjectMeta) -> list[tuple[str, str]]:
    stored = {"Content-Type": meta.content_type, **meta.headers}
    for param, name in RESPONSE_OVERRIDES.items():
        if param in req.query:
            stored[name] = req.query[param]
    headers = [("ETag", meta.etag), ("Last-Modified", http_date(meta.last_modified)), ("Accept-Ranges", "bytes")]
    headers += list(stored.items())
    if "x-amz-server-side-encryption" not in meta.headers:
        headers += encryption_of(meta)
    headers += expiration(req, meta)
    headers += [("x-amz-meta-" + name, value) for name, value in meta.metadata.items()]
    if meta.storage_class != "STANDARD":
        headers.append(("x-amz-storage-class", meta.storage_class))
    return headers


def read_conditions(req: Request, meta: ObjectMeta) -> Response | None:
    """GET/HEAD preconditions in RFC 7232's order, as S3 applies them: 412 PreconditionFailed,
    or a 304 response to send instead of the object, or None to go on."""
    if_match, if_none_match = req.header("If-Match"), req.header("If-None-Match")
    if if_match is not None:
        if not etag_matches(if_match, meta.etag):
            raise precondition_failed("If-Match")
    else:
        since = parse_http_date(req.header("If-Unmodified-Since"))
        if since is not None and int(meta.last_modified) > since:
            raise precondition_failed("If-Unmodified-Since")
    not_modified = Response(304, [("ETag", meta.etag), ("Last-Modified", http_date(meta.last_modified))])
    if if_none_match is not None:
        if etag_matches(if_none_match, meta.etag):
            return not_modified
    else:
        since = parse_http_date(req.header("If-Modified-Since"))
        if since is not None and int(meta.last_modified) <= since:
            return not_modified
    return None


def part_range(meta: ObjectMeta, number: int) -> tuple[int, int] | None:
    """(first, last) byte of part `number` (GetObject's partNumber): a part as it was uploaded, or,
    for an object not made by a multipart upload, the whole object as its only part; None for an
    empty object (no range to send, so it is sent whole)."""
    if meta.parts_count and not meta.part_sizes:
        raise not_implemented("partNumber")  # completed before kinesim kept the parts' sizes
    sizes = meta.part_sizes or [meta.size]
    if number > len(sizes):
        raise S3Error("InvalidPartNumber", "The requested partnumber is not satisfiable", 416,
                      PartNumberRequested=number, ActualPartCount=len(sizes))
    first = sum(sizes[:number - 1])
    return (first, first + sizes[number - 1] - 1) if meta.size else None


def parse_range(value: str | None, size: int) -> tuple[int, int] | None:
    """(first, last) byte of a `Range: bytes=a-b | a- | -n` header; None when there is none, or it is
    not one S3 serves (a malformed or multi-range header is ignored and the whole object sent);
    InvalidRange (416) when it starts past the end."""
    if not value:
        return None
    m = _RANGE.fullmatch(value.strip())
    if m is None or (not m[1] and not m[2]):
        return None
    if m[1]:
        first = int(m[1])
        last = int(m[2]) if m[2] else size - 1
        if m[2] and last < first:
            return None
        if first >= size:
            raise _invalid_range(value, size)
        return first, min(last, size - 1)
    suffix = int(m[2])
    if suffix == 0 or size == 0:
        raise _invalid_range(value, size)
    return max(0, size - suffix), size - 1


def _invalid_range(value: str, size: int) -> S3Error:
    return S3Error("InvalidRange", "The requested range is not satisfiable", 416, RangeRequested=value,
                   ActualObjectSize=size)


def _read_file(f: BinaryIO, start: int, length: int, chunk: int = 1 << 20) -> Iterator[bytes]:
    try:
        f.seek(start)
        while length > 0:
            data = f.read(min(chunk, length))
            if not data:
                return
            length -= len(data)
            yield data
    finally:
        f.close()


# ---------------------------------------------------------------------------------------------
# CopyObject


def copy_source(req: Request) -> tuple[str, str]:
    """(bucket, key) of `x-amz-copy-source: [/]bucket/key[?versionId=null]` (URL-encoded)."""
    raw = req.header("x-amz-copy-source") or ""
    path, _, version = raw.partition("?versionId=")
    bucket, _, key = unquote(path).lstrip("/").partition("/")
    if not bucket or not key:
        raise invalid_argument("Invalid copy source object key", "x-amz-copy-source", raw)
    if version and version != "null":  # no object here has a version but "null"
        raise S3Error("NoSuchVersion", "The specified version does not exist.", 404, Key=key, VersionId=version)
    return bucket, key


def copy_conditions(req: Request, meta: ObjectMeta) -> None:
    """x-amz-copy-source-if-*: each one that fails is a 412."""
    if_match = req.header("x-amz-copy-source-if-match")
    if_none_match = req.header("x-amz-copy-source-if-none-match")
    if if_match is not None:
        if not etag_matches(if_match, meta.etag):
            raise precondition_failed("x-amz-copy-source-If-Match")
    else:
        since = parse_http_date(req.header("x-amz-copy-source-if-unmodified-since"))
        if since is not None and int(meta.last_modified) > since:
            raise precondition_failed("x-amz-copy-source-If-Unmodified-Since")
    if if_none_match is not None:
        if etag_matches(if_none_match, meta.etag):
            raise precondition_failed("x-amz-copy-source-If-None-Match")
    else:
        since = parse_http_date(req.header("x-amz-copy-source-if-modified-since"))
        if since is not None and int(meta.last_modified) <= since:
            raise precondition_failed("x-amz-copy-source-If-Modified-Since")


def copy_object(req: Request) -> Response:
    src_bucket, src_key = copy_source(req)
    req.objects.bucket_info(req.bucket)
    check_key(req.key)
    directive = (req.header("x-amz-metadata-directive") or "COPY").upper()
    if directive not in ("COPY", "REPLACE"):
        raise invalid_argument("Unknown metadata directive.", "x-amz-metadata-directive", directive)
    if_match, if_none_match = write_conditions(req)
    f, source = req.objects.open_object(src_bucket, src_key)
    with f:
        copy_conditions(req, source)
        klass = storage_class(req, source.storage_class)
        if (src_bucket, src_key) == (req.bucket, req.key) and directive == "COPY" \
                and req.header("x-amz-storage-class") is None and req.header("x-amz-website-redirect-location") is None:
            raise invalid_request("This copy request is illegal because it is trying to copy an object to itself "
                                  "without changing the object's metadata, storage class, website redirect location "
                                  "or encryption attributes.")
        if directive == "REPLACE":
            content_type = req.header("Content-Type") or DEFAULT_CONTENT_TYPE
            metadata, headers = user_metadata(req), stored_headers(req)
        else:
            content_type, metadata, headers = source.content_type, source.metadata, source.headers
        headers = {k: v for k, v in headers.items() if not k.startswith("x-amz-server-side-encryption")} \
            | encryption(req)  # the destination's encryption, not the source's
        staged = req.objects.stage(f)
    try:
        # The bytes are the source's, so is a full-object checksum of them.
        meta = req.objects.commit(req.bucket, req.key, staged, content_type=content_type, metadata=metadata,
                                  headers=headers, checksums=source.checksums, storage_class=klass,
                                  if_match=if_match, if_none_match=if_none_match,
                                  origin=origin(req, "ObjectCreated:Copy"))
    finally:
        staged.discard()
    root = document("CopyObjectResult")
    element(root, "ETag", meta.etag)
    element(root, "LastModified", iso8601(meta.last_modified))
    for algorithm, value in meta.checksums.items():
        element(root, "ChecksumType", meta.checksum_type)
        element(root, "Checksum" + algorithm, value)
    return xml_response(root, headers=encryption_of(meta))

