"""Multipart uploads: CreateMultipartUpload, UploadPart, UploadPartCopy, CompleteMultipartUpload,
AbortMultipartUpload, ListParts, ListMultipartUploads."""
from __future__ import annotations

import re
from typing import BinaryIO
from urllib.parse import quote

from .errors import invalid_argument, invalid_request, malformed_xml
from .exchange import Request, Response, xml_response
from .notification_ops import origin
from .object_ops import (copy_conditions, copy_source, encryption, encryption_of, receive_body, storage_class,
                         stored_headers, user_metadata, write_conditions)
from .payload import CHECKSUM_ALGORITHMS, checksum_header
from .rules import DEFAULT_CONTENT_TYPE, check_key
from .xmldoc import document, element, iso8601

_COPY_RANGE = re.compile(r"bytes=(\d+)-(\d+)")


def create_multipart_upload(req: Request) -> Response:
    req.objects.bucket_info(req.bucket)
    check_key(req.key)
    algorithm = (req.header("x-amz-checksum-algorithm") or "").upper() or None
    if algorithm is not None and algorithm not in CHECKSUM_ALGORITHMS:
        raise invalid_request("Checksum algorithm provided is unsupported. Please try again with any of the valid "
                              f"types: [{', '.join(CHECKSUM_ALGORITHMS)}]")
    checksum_type = req.header("x-amz-checksum-type")
    upload = req.objects.create_multipart_upload(
        req.bucket, req.key, req.header("Content-Type") or DEFAULT_CONTENT_TYPE, user_metadata(req),
        stored_headers(req) | encryption(req), storage_class(req), algorithm, checksum_type)
    root = document("InitiateMultipartUploadResult")
    element(root, "Bucket", req.bucket)
    element(root, "Key", req.key)
    element(root, "UploadId", upload.upload_id)
    headers = [(k, v) for k, v in upload.headers.items() if k.startswith("x-amz-server-side-encryption")]
    headers += [("x-amz-checksum-algorithm", algorithm)] if algorithm else []
    if algorithm and checksum_type:
        headers.append(("x-amz-checksum-type", checksum_type))
    return xml_response(root, headers=headers)


def upload_part(req: Request) -> Response:
    number = req.part_number()  # the router sends only requests with both partNumber and uploadId
    upload_id = req.query["uploadId"]
    req.objects.get_upload(req.bucket, req.key, upload_id)  # NoSuchUpload before the body is read
    staged, checksums = receive_body(req)
    try:
        part = req.objects.upload_part(req.bucket, req.key, upload_id, number, staged, checksums)
    finally:
        staged.discard()
    return Response(200, [("ETag", part.etag)] + [(checksum_header(a), v) for a, v in part.checksums.items()])


class _Slice:
    """`length` bytes of an open file from `start`, read like a file."""

    def __init__(self, f: BinaryIO, start: int, length: int):
        f.seek(start)
        self.f, self.left = f, length

    def read(self, size: int = 1 << 20) -> bytes:
        data = self.f.read(min(size, self.left)) if self.left > 0 else b""
        self.left -= len(data)
        return data


def upload_part_copy(req: Request) -> Response:
    number = req.part_number()
    upload_id = req.query["uploadId"]
    src_bucket, src_key = copy_source(req)
    req.objects.get_upload(req.bucket, req.key, upload_id)
    f, source = req.objects.open_object(src_bucket, src_key)
    with f:
        copy_conditions(req, source)
        start, length = 0, source.size
        spec = req.header("x-amz-copy-source-range")
        if spec is not None:
            m = _COPY_RANGE.fullmatch(spec.strip())
            if m is None or int(m[2]) < int(m[1]):
                raise invalid_argument("The x-amz-copy-source-range value must be of the form bytes=first-last "
                                       "where first and last are the zero-based offsets of the first and last bytes "
                                       "to copy", "x-amz-copy-source-range", spec)
            if int(m[2]) >= source.size:
                raise invalid_argument(f"Range specified is not valid for source object of size: {source.size}",
                                       "x-amz-copy-source-range", spec)
            start, length = int(m[1]), int(m[2]) - int(m[1]) + 1
        staged = req.objects.stage(_Slice(f, start, length))
    try:
        part = req.objects.upload_part(req.bucket, req.key, upload_id, number, staged)
    finally:
        staged.discard()
    root = document("CopyPartResult")
    element(root, "ETag", part.etag)
    element(root, "LastModified", iso8601(part.last_modified))
    return xml_response(root)


def complete_multipart_upload(req: Request) -> Response:
    upload_id = req.query["uploadId"]
    req.objects.get_upload(req.bucket, req.key, upload_id)
    if_match, if_none_match = write_conditions(req)
    root = req.xml_body()
    if root.tag != "CompleteMultipartUpload":
        raise malformed_xml()
    parts = []
    for node in root.findall("Part"):
        number, etag = node.findtext("PartNumber"), node.findtext("ETag")
        if number is None or etag is None or not number.strip().isdigit():
            raise malformed_xml()
        parts.append((int(number), etag))
    meta = req.objects.complete_multipart_upload(req.bucket, req.key, upload_id, parts, if_match, if_none_match,
                                                 origin=origin(req, "ObjectCreated:CompleteMultipartUpload"))
    result = document("CompleteMultipartUploadResult")
    element(result, "Location", f"http://{req.host}/{req.bucket}/{quote(req.key)}")
    element(result, "Bucket", req.bucket)
    element(result, "Key", req.key)
    element(result, "ETag", meta.etag)
    return xml_response(result, headers=encryption_of(meta))


def abort_multipart_upload(req: Request) -> Response:
    req.objects.abort_multipart_upload(req.bucket, req.key, req.query["uploadId"])
    return Response(204)


def _initiator(parent, req: Request, tag: str) -> None:
    element(element(parent, tag), "ID", req.owner_id)


def list_parts(req: Request) -> Response:
    upload_id = req.query["uploadId"]
    upload = req.objects.get_upload(req.bucket, req.key, upload_id)
    max_parts = min(req.int_param("max-parts", 1000, "Argument max-parts must be an integer between 0 and "
                                  "2147483647"), 1000)
    marker = req.int_param("part-number-marker", 0, "Argument part-number-marker must be an integer between 0 and "
                           "2147483647")
    parts = [p for p in req.objects.list_parts(req.bucket, req.key, upload_id) if p.number > marker]
    page = parts[:max_parts]
    root = document("ListPartsResult")
    element(root, "Bucket", req.bucket)
    element(root, "Key", req.key)
    element(root, "UploadId", upload_id)
    element(root, "PartNumberMarker", marker)
    if page:
        element(root, "NextPartNumberMarker", page[-1].number)
    element(root, "MaxParts", max_parts)
    element(root, "IsTruncated", len(parts) > max_parts)
    for part in page:
        node = element(root, "Part")
        element(node, "PartNumber", part.number)
        element(node, "LastModified", iso8601(part.last_modified))
        element(node, "ETag", part.etag)
        element(node, "Size", part.size)
        for algorithm, value in part.checksums.items():
            element(node, "Checksum" + algorithm, value)
    _initiator(root, req, "Initiator")
    _initiator(root, req, "Owner")
    element(root, "StorageClass", upload.storage_class)
    if upload.checksum_algorithm:
        element(root, "ChecksumAlgorithm", upload.checksum_algorithm)
    return xml_response(root)


def list_multipart_uploads(req: Request) -> Response:
    prefix = req.query.get("prefix", "")
    max_uploads = min(req.int_param("max-uploads", 1000, "Argument max-uploads must be an integer between 0 and "
                                    "2147483647"), 1000)
    key_marker = req.query.get("key-marker", "")
    uploads = [u for u in req.objects.list_multipart_uploads(req.bucket)
               if u.key.startswith(prefix) and u.key > key_marker]
    page = uploads[:max_uploads]
    root = document("ListMultipartUploadsResult")
    element(root, "Bucket", req.bucket)
    element(root, "KeyMarker", key_marker)
    element(root, "UploadIdMarker", req.query.get("upload-id-marker", ""))
    if len(uploads) > max_uploads and page:  # max-uploads=0: truncated, with nothing to go on from
        element(root, "NextKeyMarker", page[-1].key)
        element(root, "NextUploadIdMarker", page[-1].upload_id)
    element(root, "Prefix", prefix)
    element(root, "MaxUploads", max_uploads)
    element(root, "IsTruncated", len(uploads) > max_uploads)
    for upload in page:
        node = element(root, "Upload")
        element(node, "Key", upload.key)
        element(node, "UploadId", upload.upload_id)
        _initiator(node, req, "Initiator")
        _initiator(node, req, "Owner")
        element(node, "StorageClass", upload.storage_class)
        element(node, "Initiated", iso8601(upload.initiated))
    return xml_response(root)
