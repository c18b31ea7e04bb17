"""S3 resources: AWS::S3::Bucket."""
from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from .intrinsics import pseudo_parameters
from .resources import Applied, ResourceHandler, coerce, error_code
from .s3_bucket_properties import CONFIGURATIONS
from .template import DeployError


class S3Bucket(ResourceHandler):
    """AWS::S3::Bucket: a bucket of kinesim's object store, with the configurations a template
    gives it (versioning, lifecycle, encryption, public access block, ownership controls, CORS,
    tags, event notifications) applied through the S3 API, each as CloudFormation's provider does: a configuration the
    template drops in an update is deleted. Properties kinesim's S3 does not keep (website,
    replication, logging, object lock, ...) are refused rather than dropped."""
    type_name = "AWS::S3::Bucket"
    name_property = "BucketName"
    name_max_length = 63
    attributes = frozenset({"Arn", "DomainName", "RegionalDomainName", "DualStackDomainName"})
    SUPPORTED = {"BucketName", "AccessControl", *(c.prop for c in CONFIGURATIONS)}

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, self.SUPPORTED)
        acl = properties.get("AccessControl", "Private")
        if acl != "Private":
            # kinesim's S3 keeps no ACLs. `Private` (owner-only) is the ACL every bucket has anyway, and
            # CDK's bootstrap bucket asks for it; a public canned ACL would be a promise not kept.
            raise DeployError(f"property AccessControl {acl!r} is not supported by kinesim deploy: kinesim's S3 keeps "
                              "no ACLs, so only Private (every bucket's own ACL) can be deployed; grant access with "
                              "a bucket policy instead")
        requests = {}
        for config in CONFIGURATIONS:
            if config.prop in properties:
                requests[config.prop] = coerce(self._input_shape(config.put), config.convert(properties[config.prop]))
        desired: dict[str, Any] = {"BucketName": properties.get("BucketName")}
        if requests:  # (a bucket without any is recorded as before configurations were kept)
            desired["Configurations"] = requests
        return desired

    def _input_shape(self, method: str) -> Any:
        s3 = self.target.s3
        return s3.meta.service_model.operation_model(s3.meta.method_to_api_mapping[method]).input_shape

    def _apply(self, name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        """Put each configuration that is new or changed; remove each that was dropped."""
        for config in CONFIGURATIONS:
            before, after = old.get(config.prop), new.get(config.prop)
            if after is not None and after != before:
                self._call(config.put, name, config.prop, after)
            elif after is None and before is not None:
                self._call(config.remove, name, config.prop, config.remove_args or {})

    def _call(self, method: str, bucket: str, prop: str, arguments: dict[str, Any]) -> None:
        try:
            getattr(self.target.s3, method)(Bucket=bucket, **arguments)
        except ClientError as err:
            message = err.response.get("Error", {}).get("Message", "")
            raise DeployError(f"{prop}: {err.operation_name} failed: {error_code(err)}: {message}") from None

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
        self._apply(name, {}, desired.get("Configurations", {}))
        return Applied(name, self.bucket_attributes(name))

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        # A new BucketName replaces the bucket (create-only); the configurations change in place.
        self._apply(physical_id, old.get("Configurations", {}), new.get("Configurations", {}))
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
