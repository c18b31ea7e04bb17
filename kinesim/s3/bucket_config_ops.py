"""Bucket configuration operations: Put/Get/Delete of BucketCors, BucketLifecycleConfiguration,
BucketPolicy, BucketEncryption, PublicAccessBlock, BucketTagging and BucketOwnershipControls;
GetBucketPolicyStatus; Put/GetBucketVersioning. Each is the sub-resource (`?cors`, ...) of a
bucket; `handler(method, query)` picks one for the router."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from . import bucket_config as bc
from . import bucket_config_xml
from .errors import S3Error, invalid_request
from .exchange import Request, Response
from .xmldoc import CONTENT_TYPE, document, element, serialize

# PutBucketLifecycleConfiguration's header, and the values S3 takes for it.
TRANSITION_MINIMUM = "x-amz-transition-default-minimum-object-size"
TRANSITION_MINIMUMS = ("all_storage_classes_128K", "varies_by_storage_class")


@dataclass(frozen=True)
class Kind:
    name: str                  # the sub-resource, and the key it is kept under
    operation: str             # the Put operation (its request document is the Get's answer)
    check: Callable            # S3's checks of a document: returns what is kept (None: nothing)
    put_status: int = 200


KINDS = {k.name: k for k in (
    Kind(bc.CORS, "PutBucketCors", bc.check_cors),
    Kind(bc.LIFECYCLE, "PutBucketLifecycleConfiguration", bc.check_lifecycle),
    Kind(bc.ENCRYPTION, "PutBucketEncryption", bc.check_encryption),
    Kind(bc.PUBLIC_ACCESS_BLOCK, "PutPublicAccessBlock", bc.check_public_access_block),
    Kind(bc.TAGGING, "PutBucketTagging", bc.check_tagging, 204),
    Kind(bc.OWNERSHIP, "PutBucketOwnershipControls", bc.check_ownership),
    Kind(bc.VERSIONING, "PutBucketVersioning", bc.check_versioning),
)}


def handler(method: str, query: dict[str, str]) -> Callable[[Request], Response] | None:
    """The operation of a bucket request on a configuration sub-resource, None if it is not one."""
    if "policyStatus" in query:
        return get_bucket_policy_status if method == "GET" else None
    if "policy" in query:
        return {"GET": get_bucket_policy, "PUT": put_bucket_policy, "DELETE": delete_bucket_policy}.get(method)
    for name, kind in KINDS.items():
        if name in query:
            if name == bc.VERSIONING and method == "DELETE":
                return None  # versioning cannot be deleted, only suspended
            operations = {"GET": _get, "PUT": _put, "DELETE": _delete}
            if method in operations:
                return lambda req, kind=kind, op=operations[method]: op(req, kind)
            return None
    return None


def _xml(body: bytes, status: int = 200, headers: list[tuple[str, str]] | None = None) -> Response:
    return Response(status, [("Content-Type", CONTENT_TYPE)] + list(headers or []), body)


def _put(req: Request, kind: Kind) -> Response:
    req.objects.bucket_info(req.bucket)  # NoSuchBucket before the body is judged
    headers = []
    if kind.name == bc.LIFECYCLE:
        minimum = req.header(TRANSITION_MINIMUM) or TRANSITION_MINIMUMS[0]
        if minimum not in TRANSITION_MINIMUMS:
            raise invalid_request(f"Invalid TransitionDefaultMinimumObjectSize found: {minimum}")
        headers.append((TRANSITION_MINIMUM, minimum))
    doc = kind.check(bucket_config_xml.read(kind.operation, req.xml_body()))
    if headers:  # kept beside the rules (the document's writer leaves it out)
        doc[headers[0][0]] = headers[0][1]
    bc.put(req.objects, req.bucket, kind.name, doc)
    return Response(kind.put_status, headers)


def _get(req: Request, kind: Kind) -> Response:
    if kind.name == bc.VERSIONING:
        # A bucket that never had versioning answers an empty document (recorded AWS answer:
        # test_bucket_versioning_crud "get-versioning-before").
        doc = bc.find(req.objects, req.bucket, kind.name) or {}
    else:
        doc = bc.get(req.objects, req.bucket, kind.name)
    headers = [(TRANSITION_MINIMUM, doc.get(TRANSITION_MINIMUM, TRANSITION_MINIMUMS[0]))] \
        if kind.name == bc.LIFECYCLE else []
    return _xml(bucket_config_xml.write(kind.operation, doc), headers=headers)


def _delete(req: Request, kind: Kind) -> Response:
    bc.delete(req.objects, req.bucket, kind.name)  # deleting what is not there succeeds too
    return Response(204)


# ---------------------------------------------------------------------------------------------
# bucket policies: a JSON document, not XML


def put_bucket_policy(req: Request) -> Response:
    req.objects.bucket_info(req.bucket)
    text = bc.check_policy(req.small_body().decode("utf-8", "replace"))
    block = bc.find(req.objects, req.bucket, bc.PUBLIC_ACCESS_BLOCK) or {}
    if block.get("BlockPublicPolicy") and bc.policy_is_public(text):
        # S3 refuses a public policy while the bucket blocks them (PublicAccessBlockConfiguration's
        # reference); on the wire a plain 403 AccessDenied (as reported in torchbox/buckup#18).
        raise S3Error("AccessDenied", "Access Denied", 403)
    bc.put(req.objects, req.bucket, bc.POLICY, text)
    return Response(204)


def get_bucket_policy(req: Request) -> Response:
    policy = bc.get(req.objects, req.bucket, bc.POLICY)
    return Response(200, [("Content-Type", "application/json")], policy.encode())


def delete_bucket_policy(req: Request) -> Response:
    bc.delete(req.objects, req.bucket, bc.POLICY)
    return Response(204)


def get_bucket_policy_status(req: Request) -> Response:
    policy = bc.get(req.objects, req.bucket, bc.POLICY)
    root = document("PolicyStatus")
    element(root, "IsPublic", bc.policy_is_public(policy))
    return _xml(serialize(root))
