"""S3 resources: AWS::S3::Bucket."""
from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from .resources import (Applied, ResourceHandler, error_code)
from .template import DeployError

from .intrinsics import pseudo_parameters


class S3Bucket(ResourceHandler):
    """AWS::S3::Bucket: a bucket of kinesim's object store. kinesim's S3 keeps buckets and
    objects, not bucket configurations (versioning, lifecycle, notifications, tags, ...): a
    template that sets one is refused rather than half applied."""
    type_name = "AWS::S3::Bucket"
    name_property = "BucketName"
    name_max_length = 63
    attributes = frozenset({"Arn", "DomainName", "RegionalDomainName", "DualStackDomainName"})
    SUPPORTED = {"BucketName"}

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, self.SUPPORTED)
        return {"BucketName": properties.get("BucketName")}

    def generate_name(self, logical_id: str) -> str:
        # `stack-logicalid-suffix` in lower case: S3 takes no capitals in a bucket name.
        return super().generate_name(logical_id).lower()

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        assert name
        if self._exists(name):
            # CloudFormation does not adopt a bucket it did not make (its message).
            raise DeployError(f"{name} already exists")
        region = self.target.region
        # Outside us-east-1, S3 wants the region named (CloudFormation makes the bucket in the stack's).
        where = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
        self.target.s3.create_bucket(Bucket=name, **where)
        return Applied(name, self.bucket_attributes(name))

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        # BucketName, the one property, is create-only: a new name replaces the bucket, and
        # there is nothing else to change in place.
        return attributes

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        try:
            self.target.s3.delete_bucket(Bucket=physical_id)
        except ClientError as err:
            if error_code(err) == "NoSuchBucket":
                return
            if error_code(err) == "BucketNotEmpty":
                raise DeployError(
                    f"DeleteBucket failed: BucketNotEmpty: The bucket you tried to delete is not empty. "
                    f"CloudFormation deletes a bucket only when it holds no objects: empty it (e.g. "
                    f"`aws s3 rm s3://{physical_id} --recursive`) and deploy or delete again, or give the "
                    "bucket `DeletionPolicy: Retain` to keep it") from None
            raise

    def _exists(self, name: str) -> bool:
        try:
            self.target.s3.head_bucket(Bucket=name)
            return True
        except ClientError as err:
            if error_code(err) in ("404", "NoSuchBucket"):
                return False
            raise

    def bucket_attributes(self, name: str) -> dict[str, str]:
        """What Fn::GetAtt gives for a bucket: the ARN and S3's host names for it, as AWS has them."""
        t = self.target
        suffix = pseudo_parameters(t.region, t.account_id, t.stack_name, "")["AWS::URLSuffix"]
        return {"Arn": f"arn:{t.partition}:s3:::{name}", "DomainName": f"{name}.s3.{suffix}",
                "RegionalDomainName": f"{name}.s3.{t.region}.{suffix}",
                "DualStackDomainName": f"{name}.s3.dualstack.{t.region}.{suffix}"}
