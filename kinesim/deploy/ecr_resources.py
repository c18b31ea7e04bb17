"""Amazon ECR resources: AWS::ECR::Repository (Ref: its name; Fn::GetAtt Arn, RepositoryUri).

kinesim keeps repositories and their settings but has no registry: nothing can be pushed to one
(CDK's bootstrap stack declares one for container assets; stacks without container images never
use it)."""
from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from .resources import Applied, ResourceHandler, error_code, tag_map
from .template import DeployError

_GONE = ("RepositoryNotFoundException", "LifecyclePolicyNotFoundException", "RepositoryPolicyNotFoundException")


class EcrRepository(ResourceHandler):
    type_name = "AWS::ECR::Repository"
    name_property = "RepositoryName"
    name_max_length = 256
    attributes = frozenset({"Arn", "RepositoryUri"})
    note = "no registry: images cannot be pushed to kinesim's repositories"
    SUPPORTED = {"RepositoryName", "ImageTagMutability", "ImageTagMutabilityExclusionFilters",
                 "ImageScanningConfiguration", "LifecyclePolicy", "RepositoryPolicyText", "EncryptionConfiguration",
                 "EmptyOnDelete", "Tags"}

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, self.SUPPORTED)
        lifecycle = properties.get("LifecyclePolicy") or {}
        if not isinstance(lifecycle, dict):
            raise DeployError("property LifecyclePolicy must be an object with LifecyclePolicyText")
        policy = properties.get("RepositoryPolicyText")
        encryption = properties.get("EncryptionConfiguration")
        filters = properties.get("ImageTagMutabilityExclusionFilters")
        return {
            "RepositoryName": properties.get("RepositoryName"),
            "ImageTagMutability": properties.get("ImageTagMutability") or "MUTABLE",
            "ImageTagMutabilityExclusionFilters": None if filters is None else [
                {"filterType": f.get("ImageTagMutabilityExclusionFilterType"),
                 "filter": f.get("ImageTagMutabilityExclusionFilterValue")} for f in _list(filters, "filters")],
            "ScanOnPush": _boolean((properties.get("ImageScanningConfiguration") or {}).get("ScanOnPush"),
                                   "ImageScanningConfiguration.ScanOnPush"),
            "LifecyclePolicyText": lifecycle.get("LifecyclePolicyText"),
            # A JSON object is taken as CloudFormation takes it: the document it spells.
            "RepositoryPolicyText": policy if policy is None or isinstance(policy, str)
            else json.dumps(policy, separators=(",", ":")),
            "EncryptionConfiguration": None if encryption is None else {
                k: v for k, v in (("encryptionType", encryption.get("EncryptionType")),
                                  ("kmsKey", encryption.get("KmsKey"))) if v is not None},
            "EmptyOnDelete": _boolean(properties.get("EmptyOnDelete"), "EmptyOnDelete"),
            "Tags": tag_map(properties.get("Tags")),
        }

    def generate_name(self, logical_id: str) -> str:
        # `stack-logicalid-suffix` in lower case: ECR takes no capitals in a repository name.
        return super().generate_name(logical_id).lower()

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        assert name
        ecr = self.target.ecr
        request: dict[str, Any] = {"repositoryName": name, "imageTagMutability": desired["ImageTagMutability"],
                                   "imageScanningConfiguration": {"scanOnPush": bool(desired["ScanOnPush"])}}
        if desired["ImageTagMutabilityExclusionFilters"]:
            request["imageTagMutabilityExclusionFilters"] = desired["ImageTagMutabilityExclusionFilters"]
        if desired["EncryptionConfiguration"]:
            request["encryptionConfiguration"] = desired["EncryptionConfiguration"]
        if desired["Tags"]:
            request["tags"] = [{"Key": k, "Value": v} for k, v in desired["Tags"].items()]
        repository = ecr.create_repository(**request)["repository"]
        try:
            self._apply_policies(name, {}, desired)
        except Exception:  # half made is not made: the next deploy creates it afresh
            self._delete(name, force=True)
            raise
        return Applied(name, {"Arn": repository["repositoryArn"], "RepositoryUri": repository["repositoryUri"]})

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        # A new RepositoryName or EncryptionConfiguration replaces the repository (create-only).
        ecr = self.target.ecr
        if (old.get("ImageTagMutability"), old.get("ImageTagMutabilityExclusionFilters")) != \
                (new["ImageTagMutability"], new["ImageTagMutabilityExclusionFilters"]):
            request: dict[str, Any] = {"repositoryName": physical_id, "imageTagMutability": new["ImageTagMutability"]}
            if new["ImageTagMutabilityExclusionFilters"]:
                request["imageTagMutabilityExclusionFilters"] = new["ImageTagMutabilityExclusionFilters"]
            ecr.put_image_tag_mutability(**request)
        if bool(old.get("ScanOnPush")) != bool(new["ScanOnPush"]):
            ecr.put_image_scanning_configuration(repositoryName=physical_id,
                                                 imageScanningConfiguration={"scanOnPush": bool(new["ScanOnPush"])})
        self._apply_policies(physical_id, old, new)
        arn = attributes.get("Arn")
        old_tags, new_tags = old.get("Tags") or {}, new["Tags"]
        removed = sorted(set(old_tags) - set(new_tags))
        if removed:
            ecr.untag_resource(resourceArn=arn, tagKeys=removed)
        changed = [{"Key": k, "Value": v} for k, v in new_tags.items() if old_tags.get(k) != v]
        if changed:
            ecr.tag_resource(resourceArn=arn, tags=changed)
        return attributes

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        # EmptyOnDelete forces the deletion of a repository that holds images; kinesim's never do.
        self._delete(physical_id, force=bool(desired.get("EmptyOnDelete")))

    def _apply_policies(self, name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        """Put the lifecycle and repository policies that are new or changed, delete those dropped."""
        ecr = self.target.ecr
        lifecycle = new["LifecyclePolicyText"]
        if lifecycle is not None and lifecycle != old.get("LifecyclePolicyText"):
            ecr.put_lifecycle_policy(repositoryName=name, lifecyclePolicyText=lifecycle)
        elif lifecycle is None and old.get("LifecyclePolicyText") is not None:
            self._unless_gone(lambda: ecr.delete_lifecycle_policy(repositoryName=name))
        policy = new["RepositoryPolicyText"]
        if policy is not None and policy != old.get("RepositoryPolicyText"):
            ecr.set_repository_policy(repositoryName=name, policyText=policy)
        elif policy is None and old.get("RepositoryPolicyText") is not None:
            self._unless_gone(lambda: ecr.delete_repository_policy(repositoryName=name))

    def _delete(self, name: str, force: bool) -> None:
        self._unless_gone(lambda: self.target.ecr.delete_repository(repositoryName=name, force=force))

    @staticmethod
    def _unless_gone(call: Any) -> None:
        try:
            call()
        except ClientError as err:
            if error_code(err) not in _GONE:
                raise


def _list(value: Any, what: str) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise DeployError(f"property ImageTagMutabilityExclusionFilters must be a list of {what}")
    return value


def _boolean(value: Any, prop: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise DeployError(f"property {prop} must be a boolean, not {value!r}")
