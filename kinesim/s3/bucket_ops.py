"""Bucket operations: ListBuckets, CreateBucket, HeadBucket, DeleteBucket, GetBucketLocation, and
the object listings ListObjects (v1), ListObjectsV2 and ListObjectVersions (a bucket's
configurations, versioning included, are `bucket_config_ops`')."""
from __future__ import annotations

import base64
import binascii
import functools
from urllib.parse import quote

from ..protocol.models import service_model
from . import bucket_config
from .errors import S3Error, bucket_already_exists, invalid_argument, invalid_bucket_name
from .exchange import Request, Response, canonical_id, xml_response
from .objects import ObjectMeta
from .rules import valid_bucket_name
from .xmldoc import document, element, iso8601

MAX_KEYS = 1000
MAX_KEYS_MESSAGE = "Provided max-keys not an integer or within integer range"


@functools.cache
def location_constraints() -> frozenset[str]:
    """The LocationConstraint values S3 takes, from botocore's model of S3."""
    model = service_model("s3")
    return frozenset(model.shape_for("BucketLocationConstraint").enum)


def _owner(parent, owner_id: str) -> None:
    owner = element(parent, "Owner")
    element(owner, "ID", owner_id)


def _bucket_owner_id(req: Request) -> str:
    """The canonical id of the bucket's owner, who owns its objects (S3's default object ownership,
    BucketOwnerEnforced, whoever wrote them). NoSuchBucket."""
    return canonical_id(req.objects.bucket_info(req.bucket).owner)


def list_buckets(req: Request) -> Response:
    max_buckets = req.int_param("max-buckets", 10_000, "Argument max-buckets must be an integer between 1 and "
                                "10000", minimum=1)
    if max_buckets > 10_000:
        raise invalid_argument("Argument max-buckets must be an integer between 1 and 10000", "max-buckets",
                               max_buckets)
    prefix = req.query.get("prefix", "")
    region = req.query.get("bucket-region")
    after = _decode_token(req.query["continuation-token"], "continuation-token") \
        if "continuation-token" in req.query else ""
    # The caller's own buckets only (of every region), though their names are shared by all accounts.
    buckets = [b for b in req.objects.list_buckets() if b.owner == req.account and b.name.startswith(prefix)
               and b.name > after and (region is None or b.region == region)]
    page = buckets[:max_buckets]
    root = document("ListAllMyBucketsResult")
    listed = element(root, "Buckets")
    for b in page:
        node = element(listed, "Bucket")
        element(node, "Name", b.name)
        element(node, "CreationDate", iso8601(b.created))
        element(node, "BucketRegion", b.region)
    _owner(root, req.owner_id)
    if len(buckets) > max_buckets:
        element(root, "ContinuationToken", _encode_token(page[-1].name))
    if "prefix" in req.query:
        element(root, "Prefix", prefix)
    return xml_response(root)


def create_bucket(req: Request) -> Response:
    name = req.bucket
    if not valid_bucket_name(name):
        raise invalid_bucket_name(name)
    config = req.xml_body(required=False)
    constraint = None
    if config is not None:
        if config.tag != "CreateBucketConfiguration":
            raise S3Error("MalformedXML", "The XML you provided was not well-formed or did not validate against our "
                          "published schema", 400)
        node = config.find("LocationConstraint")
        constraint = node.text.strip() if node is not None and node.text and node.text.strip() else None
    endpoint = req.region
    if constraint is not None and (constraint not in location_constraints() or constraint == "us-east-1"):
        raise S3Error("InvalidLocationConstraint", "The specified location-constraint is not valid", 400,
                      LocationConstraint=constraint)
    # The us-east-1 (global) endpoint creates buckets in any region; a regional one only in its own.
    if endpoint != "us-east-1" and constraint != endpoint:
        raise S3Error("IllegalLocationConstraintException", f"The {constraint or 'unspecified'} location constraint "
                      "is incompatible for the region specific endpoint this request was sent to.", 400)
    region = {"EU": "eu-west-1", None: "us-east-1"}.get(constraint, constraint)
    ownership = req.header("x-amz-object-ownership")
    if ownership is not None and ownership not in bucket_config.OBJECT_OWNERSHIPS:
        # Recorded AWS answer: test_bucket_ownership_controls_exc "ownership-wrong-value-at-creation".
        raise invalid_argument(f"Invalid x-amz-object-ownership header: {ownership}", "x-amz-object-ownership")
    if req.objects.bucket_exists(name):
        existing = req.objects.bucket_info(name)
        if existing.owner != req.account:  # one namespace of names for every account
            raise bucket_already_exists(name)
        if region == "us-east-1" and existing.region == "us-east-1":
            # S3 in us-east-1, for legacy compatibility: re-creating your own bucket succeeds.
            return Response(200, [("Location", "/" + name)])
    req.objects.create_bucket(name, region, req.account)  # BucketAlreadyOwnedByYou / BucketAlreadyExists
    if ownership is not None:
        bucket_config.put(req.objects, name, bucket_config.OWNERSHIP, {"Rules": [{"ObjectOwnership": ownership}]})
    return Response(200, [("Location", "/" + name)])


def head_bucket(req: Request) -> Response:
    info = req.objects.bucket_info(req.bucket)
    return Response(200, [("x-amz-bucket-region", info.region), ("x-amz-access-point-alias", "false")])


def delete_bucket(req: Request) -> Response:
    req.objects.delete_bucket(req.bucket)
    return Response(204)


def get_bucket_location(req: Request) -> Response:
    region = req.objects.bucket_info(req.bucket).region
    root = document("LocationConstraint")
    if region != "us-east-1":  # S3 answers us-east-1 buckets with an empty constraint
        root.text = region
    return xml_response(root)


# ---------------------------------------------------------------------------------------------
# listings


def _encode_token(last: str) -> str:
    return base64.urlsafe_b64encode(last.encode("utf-8", "surrogatepass")).decode()


def _decode_token(token: str, name: str) -> str:
    try:
        return base64.b64decode(token.encode("ascii"), altchars=b"-_", validate=True).decode("utf-8")
    except (binascii.Error, UnicodeError, ValueError):
        raise invalid_argument("The continuation token provided is incorrect", name, token) from None


def _listing_params(req: Request) -> tuple[str, str | None, int, bool]:
    max_keys = min(req.int_param("max-keys", MAX_KEYS, MAX_KEYS_MESSAGE), MAX_KEYS)
    encoding = req.query.get("encoding-type")
    if encoding is not None and encoding != "url":
        raise invalid_argument("Invalid Encoding Method specified in Request", "encoding-type", encoding)
    delimiter = req.query.get("delimiter") or None
    return req.query.get("prefix", ""), delimiter, max_keys, encoding == "url"


def _contents(root, obj: ObjectMeta, encode, owner_id: str | None) -> None:
    node = element(root, "Contents")
    element(node, "Key", encode(obj.key))
    element(node, "LastModified", iso8601(obj.last_modified))
    element(node, "ETag", obj.etag)
    for algorithm in obj.checksums:
        element(node, "ChecksumAlgorithm", algorithm)
    if obj.checksum_type:
        element(node, "ChecksumType", obj.checksum_type)
    element(node, "Size", obj.size)
    element(node, "StorageClass", obj.storage_class)
    if owner_id is not None:
        _owner(node, owner_id)


def _encoder(url: bool):
    # S3's encoding-type=url: what botocore undoes with unquote_plus ("+" must come as %2B).
    return (lambda s: quote(s, safe="/")) if url else (lambda s: s)


def _paging(root, max_keys: int, delimiter: str | None, url: bool, truncated: bool, encode) -> None:
    """What ListObjects (v1) and ListObjectVersions say of the page after its markers."""
    element(root, "MaxKeys", max_keys)
    if delimiter:
        element(root, "Delimiter", encode(delimiter))
    if url:
        element(root, "EncodingType", "url")
    element(root, "IsTruncated", truncated)


def _common_prefixes(root, page, encode) -> None:
    for common in page.common_prefixes:
        element(element(root, "CommonPrefixes"), "Prefix", encode(common))


def list_objects_v2(req: Request) -> Response:
    prefix, delimiter, max_keys, url = _listing_params(req)
    token = req.query.get("continuation-token")
    start_after = req.query.get("start-after", "")
    after = _decode_token(token, "continuation-token") if token is not None else start_after
    page = req.objects.list_objects(req.bucket, prefix, delimiter, after, max_keys)
    encode = _encoder(url)
    root = document("ListBucketResult")
    element(root, "Name", req.bucket)
    element(root, "Prefix", encode(prefix))
    if delimiter:
        element(root, "Delimiter", encode(delimiter))
    element(root, "MaxKeys", max_keys)
    if url:
        element(root, "EncodingType", "url")
    element(root, "KeyCount", len(page.objects) + len(page.common_prefixes))
    element(root, "IsTruncated", page.is_truncated)
    if token is not None:
        element(root, "ContinuationToken", token)
    if page.is_truncated:
        element(root, "NextContinuationToken", _encode_token(page.last))
    if "start-after" in req.query:
        element(root, "StartAfter", encode(start_after))
    owner_id = _bucket_owner_id(req) if req.query.get("fetch-owner", "").lower() == "true" else None
    for obj in page.objects:
        _contents(root, obj, encode, owner_id)
    _common_prefixes(root, page, encode)
    return xml_response(root)


def list_objects(req: Request) -> Response:
    prefix, delimiter, max_keys, url = _listing_params(req)
    marker = req.query.get("marker", "")
    page = req.objects.list_objects(req.bucket, prefix, delimiter, marker, max_keys)
    encode = _encoder(url)
    root = document("ListBucketResult")
    element(root, "Name", req.bucket)
    element(root, "Prefix", encode(prefix))
    element(root, "Marker", encode(marker))
    if page.is_truncated and delimiter:  # S3 sends NextMarker only with a delimiter
        element(root, "NextMarker", encode(page.last))
    _paging(root, max_keys, delimiter, url, page.is_truncated, encode)
    owner_id = _bucket_owner_id(req)
    for obj in page.objects:
        _contents(root, obj, encode, owner_id)
    _common_prefixes(root, page, encode)
    return xml_response(root)


def list_object_versions(req: Request) -> Response:
    """ListObjectVersions. kinesim keeps one version of an object, the one S3 calls "null" (what
    an object put while versioning was never enabled has): each object is listed as that version,
    the latest. The CDK's autoDeleteObjects empties a bucket this way."""
    prefix, delimiter, max_keys, url = _listing_params(req)
    key_marker = req.query.get("key-marker", "")
    version_marker = req.query.get("version-id-marker")
    if version_marker is not None and not key_marker:
        raise invalid_argument("A version-id marker cannot be specified without a key marker.", "version-id-marker",
                               version_marker)
    page = req.objects.list_objects(req.bucket, prefix, delimiter, key_marker, max_keys)
    encode = _encoder(url)
    root = document("ListVersionsResult")
    element(root, "Name", req.bucket)
    element(root, "Prefix", encode(prefix))
    element(root, "KeyMarker", encode(key_marker))
    element(root, "VersionIdMarker", version_marker or "")
    if page.is_truncated:
        element(root, "NextKeyMarker", encode(page.last))
        element(root, "NextVersionIdMarker", "null")
    _paging(root, max_keys, delimiter, url, page.is_truncated, encode)
    owner_id = _bucket_owner_id(req)
    for obj in page.objects:
        node = element(root, "Version")
        element(node, "Key", encode(obj.key))
        element(node, "VersionId", "null")
        element(node, "IsLatest", True)
        element(node, "LastModified", iso8601(obj.last_modified))
        element(node, "ETag", obj.etag)
        element(node, "Size", obj.size)
        element(node, "StorageClass", obj.storage_class)
        _owner(node, owner_id)
    _common_prefixes(root, page, encode)
    return xml_response(root)
