"""AWS::S3::BucketPolicy: the bucket's policy, set with PutBucketPolicy (S3 checks it as AWS does:
valid JSON with a Statement), returned by GetBucketPolicy, removed with the resource. Recorded,
not enforced: kinesim checks no permissions."""
from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from .resources import Applied, ResourceHandler, error_code
from .template import DeployError


class S3BucketPolicy(ResourceHandler):
    type_name = "AWS::S3::BucketPolicy"
    name_property = None
    note = "bucket policies are recorded, not enforced: kinesim does not check permissions"

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, {"Bucket", "PolicyDocument"})
        for required in ("Bucket", "PolicyDocument"):
            if required not in properties:
                raise DeployError(f"{self.type_name} needs {required}")
        document = properties["PolicyDocument"]
        # A JSON string is taken as CloudFormation takes it: the document it spells.
        text = document if isinstance(document, str) else json.dumps(document, separators=(",", ":"))
        return {"Bucket": str(properties["Bucket"]), "Policy": text}

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        self._put(desired)
        # Its Ref, as CloudFormation's, is the bucket's name (the resource's primary identifier).
        return Applied(desired["Bucket"], {})

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        if old.get("Policy") != new["Policy"]:  # a new Bucket replaces the resource (create-only)
            self._put(new)
        return attributes

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        try:
            self.target.s3.delete_bucket_policy(Bucket=desired.get("Bucket") or physical_id)
        except ClientError as err:
            if error_code(err) != "NoSuchBucket":
                raise

    def _put(self, desired: dict[str, Any]) -> None:
        try:
            self.target.s3.put_bucket_policy(Bucket=desired["Bucket"], Policy=desired["Policy"])
        except ClientError as err:
            message = err.response.get("Error", {}).get("Message", "")
            raise DeployError(f"PutBucketPolicy failed: {error_code(err)}: {message}") from None
