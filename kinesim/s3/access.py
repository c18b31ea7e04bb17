"""Where a request meets the bucket it names: the bucket's region, and its owner's policy.

The object store is global: one namespace of bucket names for all accounts and regions, as on AWS.
- A request signed for a region that is neither the bucket's nor us-east-1's is refused with the
  bucket's region, from which SDKs (botocore's S3RegionRedirectorv2) re-send it signed for that
  region. One signed for us-east-1 is served whatever the bucket's region, as S3's global endpoint
  serves it (Spark's s3a and other clients rely on that); so is an unsigned one.
- A request of another account than the bucket's owner is served only as the bucket's policy
  allows it (AccessDenied otherwise, S3's plain "Access Denied" for cross-account requests); within
  the owner's account nothing is checked, as for every kinesim service.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ..iam.evaluate import allows
from ..protocol.errors import AwsError
from . import bucket_config, bucket_ops, multipart_ops, notification_ops, object_ops
from .errors import S3Error, wrong_region

if TYPE_CHECKING:
    from ..iam.evaluate import Caller
    from .exchange import Request, Response
    from .objects import BucketInfo

Handler = Callable[["Request"], "Response"]

# Operations that name a bucket but do not act on an existing one.
_NOT_OF_A_BUCKET = frozenset({bucket_ops.create_bucket, bucket_ops.list_buckets})

# The IAM action each operation is authorized as (S3's "Actions, resources and condition keys"):
# object actions on the object's ARN, the others on the bucket's.
_OBJECT_ACTIONS: dict[Any, str] = {
    object_ops.get_object: "GetObject", object_ops.head_object: "GetObject", object_ops.put_object: "PutObject",
    object_ops.copy_object: "PutObject", object_ops.delete_object: "DeleteObject",
    multipart_ops.create_multipart_upload: "PutObject", multipart_ops.upload_part: "PutObject",
    multipart_ops.upload_part_copy: "PutObject", multipart_ops.complete_multipart_upload: "PutObject",
    multipart_ops.abort_multipart_upload: "AbortMultipartUpload",
    multipart_ops.list_parts: "ListMultipartUploadParts"}
_BUCKET_ACTIONS: dict[Any, str] = {
    bucket_ops.list_objects: "ListBucket", bucket_ops.list_objects_v2: "ListBucket",
    bucket_ops.head_bucket: "ListBucket", bucket_ops.list_object_versions: "ListBucketVersions",
    bucket_ops.get_bucket_location: "GetBucketLocation", bucket_ops.delete_bucket: "DeleteBucket",
    object_ops.delete_objects: "DeleteObject",
    multipart_ops.list_multipart_uploads: "ListBucketMultipartUploads",
    notification_ops.get_bucket_notification_configuration: "GetBucketNotification",
    notification_ops.put_bucket_notification_configuration: "PutBucketNotification"}


def admit(req: "Request", handler: Handler, caller_of: "Callable[[dict[str, Any]], Caller] | None") -> None:
    """Raise S3's error for a request the bucket it names does not take. A bucket that does not
    exist is left to the operation (NoSuchBucket)."""
    if req.bucket is None or handler in _NOT_OF_A_BUCKET:
        return
    try:
        info = req.objects.bucket_info(req.bucket)
    except AwsError:
        return
    signed = req.signed_region
    if signed is not None and signed != "us-east-1" and signed != info.region:
        raise wrong_region(signed, info.region, req.presigned)
    if req.account != info.owner and caller_of is not None:
        _check_policy(req, handler, info, caller_of(req.environ))


def _check_policy(req: "Request", handler: Handler, info: "BucketInfo", caller: "Caller") -> None:
    if handler in _OBJECT_ACTIONS:
        action, resource = _OBJECT_ACTIONS[handler], f"arn:aws:s3:::{info.name}/{req.key}"
    else:
        # A configuration's operations (not in the tables) need a grant of all of them (s3:*).
        action, resource = _BUCKET_ACTIONS.get(handler, "*"), f"arn:aws:s3:::{info.name}"
    policy = bucket_config.find(req.objects, info.name, bucket_config.POLICY)
    if policy is None or not allows(policy, caller, f"s3:{action}", resource):
        raise S3Error("AccessDenied", "Access Denied", 403)
