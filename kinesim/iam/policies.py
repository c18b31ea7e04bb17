"""Customer managed policies and their versions (CreatePolicy ... SetDefaultPolicyVersion), and
AWS's own managed policies read through the same calls.

A policy record: `{PolicyName, PolicyId, Arn, Path, Description, CreateDate, UpdateDate,
DefaultVersionId, NextVersion, Versions: [{VersionId, Document (the text sent), CreateDate}],
Tags}`. Which entities a policy is attached to is kept on the entities (roles, users, groups:
their `AttachedPolicies`); `attachment_counts` counts them, for every policy at once.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable

from kinesim.protocol.errors import AwsError

from . import documents, managed_data
from .errors import already_exists, delete_conflict, limit_exceeded, no_such_entity, not_attachable, policy_not_found
from .records import Table, arn, merged_tags, now, page, under_path, unique_id, without_tags

MAX_VERSIONS = 5


class Policies:
    def __init__(self, store: Any, account: str, partition: str, attachment_counts: Callable[[], Counter]):
        self.table = Table(store, "policy")
        self.account = account
        self.partition = partition
        self.attachment_counts = attachment_counts  # policy ARN -> how many entities it is attached to

    # lookups other modules use

    def find(self, policy_arn: str) -> dict[str, Any] | None:
        """The policy `policy_arn` names: the account's own or AWS's."""
        return managed_data.aws_policy(self.partition, policy_arn) or self.table.get(policy_arn)

    def attachable(self, policy_arn: str) -> dict[str, Any]:
        policy = self.find(policy_arn)
        if policy is None:
            raise not_attachable(policy_arn)
        return policy

    def find_existing(self, policy_arn: str) -> dict[str, Any]:
        policy = self.find(policy_arn)
        if policy is None:
            raise policy_not_found(policy_arn)
        return policy

    def _own(self, policy_arn: str, action: str) -> dict[str, Any]:
        """A customer managed policy: AWS's own belong to the `aws` account, which no caller may
        change (AWS's authorization refusal, the one IAM check kinesim makes: there is nothing else
        such a call could do)."""
        policy = self.find_existing(policy_arn)
        if policy.get("AwsManaged"):
            raise AwsError("AccessDenied", f"User: arn:{self.partition}:iam::{self.account}:root is not authorized "
                                           f"to perform: iam:{action} on resource: policy {policy_arn}", 403)
        return policy

    def attachments(self, policy_arn: str) -> int:
        return self.attachment_counts()[policy_arn]

    def summary(self, policy: dict[str, Any], counts: Counter, with_description: bool = False) -> dict[str, Any]:
        out = {k: policy[k] for k in ("PolicyName", "PolicyId", "Arn", "Path", "DefaultVersionId",
                                      "CreateDate", "UpdateDate")}
        out.update(AttachmentCount=counts[policy["Arn"]], PermissionsBoundaryUsageCount=0,
                   IsAttachable=True)
        if with_description and policy.get("Description") is not None:
            out["Description"] = policy["Description"]
        if policy.get("Tags"):
            out["Tags"] = policy["Tags"]
        return out

    # operations

    def create_policy(self, p: dict[str, Any]) -> dict[str, Any]:
        name, path = p["PolicyName"], p.get("Path", "/")
        text = p["PolicyDocument"]
        documents.checked(text)
        documents.check_quota(text, documents.MANAGED_POLICY_SIZE, "PolicySize")
        policy_arn = arn(self.partition, self.account, "policy", path, name)
        if any(existing["PolicyName"].lower() == name.lower() for existing in self.table.all()):
            raise already_exists(f"A policy called {name} already exists. Duplicate names are not allowed.")
        created = now()
        policy = {"PolicyName": name, "PolicyId": unique_id("ANPA"), "Arn": policy_arn, "Path": path,
                  "Description": p.get("Description"), "CreateDate": created, "UpdateDate": created,
                  "DefaultVersionId": "v1", "NextVersion": 2, "Tags": merged_tags([], p.get("Tags") or []),
                  "Versions": [{"VersionId": "v1", "Document": text, "CreateDate": created}]}
        self.table.put(policy_arn, policy)
        return {"Policy": self.summary(policy, Counter())}

    def get_policy(self, p: dict[str, Any]) -> dict[str, Any]:
        policy = self.find_existing(p["PolicyArn"])
        return {"Policy": self.summary(policy, self.attachment_counts(), with_description=True)}

    def list_policies(self, p: dict[str, Any]) -> dict[str, Any]:
        scope = p.get("Scope", "All")
        found: list[dict[str, Any]] = []
        if scope in ("All", "AWS"):
            found += managed_data.aws_policies(self.partition)
        if scope in ("All", "Local"):
            found += self.table.all()
        counts = self.attachment_counts()
        listed = [self.summary(x, counts) for x in under_path(found, p.get("PathPrefix"))]
        if p.get("OnlyAttached"):
            listed = [x for x in listed if x["AttachmentCount"] > 0]
        return page(listed, p, lambda x: x["PolicyName"].lower() + "\0" + x["Arn"], "Policies")

    def delete_policy(self, p: dict[str, Any]) -> None:
        policy = self._own(p["PolicyArn"], "DeletePolicy")
        if self.attachments(policy["Arn"]):
            raise delete_conflict("Cannot delete a policy attached to entities.")
        if len(policy["Versions"]) > 1:
            raise delete_conflict("This policy has more than one version. Before you delete a policy, you must "
                                  "delete the policy's versions. The default version is deleted with the policy.")
        self.table.delete(policy["Arn"])

    def tag_policy(self, p: dict[str, Any]) -> None:
        policy = self._own(p["PolicyArn"], "TagPolicy")
        policy["Tags"] = merged_tags(policy.get("Tags") or [], p["Tags"])
        self.table.put(policy["Arn"], policy)

    def untag_policy(self, p: dict[str, Any]) -> None:
        policy = self._own(p["PolicyArn"], "UntagPolicy")
        policy["Tags"] = without_tags(policy.get("Tags") or [], p["TagKeys"])
        self.table.put(policy["Arn"], policy)

    def list_policy_tags(self, p: dict[str, Any]) -> dict[str, Any]:
        return page(self.find_existing(p["PolicyArn"]).get("Tags") or [], p, lambda t: t["Key"], "Tags")

    # versions

    def _version(self, policy: dict[str, Any], version: dict[str, Any], document: bool) -> dict[str, Any]:
        out = {"VersionId": version["VersionId"],
               "IsDefaultVersion": version["VersionId"] == policy["DefaultVersionId"],
               "CreateDate": version["CreateDate"]}
        if document:
            out["Document"] = documents.answered(version["Document"])
        return out

    def _find_version(self, policy: dict[str, Any], version_id: str) -> dict[str, Any]:
        for version in policy["Versions"]:
            if version["VersionId"] == version_id:
                return version
        raise no_such_entity(f"Policy {policy['Arn']} version {version_id} does not exist or is not attachable.")

    def get_policy_version(self, p: dict[str, Any]) -> dict[str, Any]:
        policy = self.find_existing(p["PolicyArn"])
        return {"PolicyVersion": self._version(policy, self._find_version(policy, p["VersionId"]), True)}

    def list_policy_versions(self, p: dict[str, Any]) -> dict[str, Any]:
        policy = self.find_existing(p["PolicyArn"])
        versions = [self._version(policy, v, False) for v in policy["Versions"]]
        # newest first, as AWS lists them
        return page(versions, p, lambda v: f"{10**9 - int(v['VersionId'][1:]):010d}", "Versions")

    def create_policy_version(self, p: dict[str, Any]) -> dict[str, Any]:
        policy = self._own(p["PolicyArn"], "CreatePolicyVersion")
        text = p["PolicyDocument"]
        documents.checked(text)
        documents.check_quota(text, documents.MANAGED_POLICY_SIZE, "PolicySize")
        if len(policy["Versions"]) >= MAX_VERSIONS:
            raise limit_exceeded(f"A managed policy can have up to {MAX_VERSIONS} versions. Before you create a new "
                                 "version, you must delete an existing version.")
        version = {"VersionId": f"v{policy['NextVersion']}", "Document": text, "CreateDate": now()}
        policy["NextVersion"] += 1
        policy["Versions"].append(version)
        if p.get("SetAsDefault"):
            policy["DefaultVersionId"] = version["VersionId"]
            policy["UpdateDate"] = version["CreateDate"]
        self.table.put(policy["Arn"], policy)
        return {"PolicyVersion": self._version(policy, version, False)}

    def delete_policy_version(self, p: dict[str, Any]) -> None:
        policy = self._own(p["PolicyArn"], "DeletePolicyVersion")
        version = self._find_version(policy, p["VersionId"])
        if version["VersionId"] == policy["DefaultVersionId"]:
            raise delete_conflict("Cannot delete the default version of a policy.")
        policy["Versions"].remove(version)
        self.table.put(policy["Arn"], policy)

    def set_default_policy_version(self, p: dict[str, Any]) -> None:
        policy = self._own(p["PolicyArn"], "SetDefaultPolicyVersion")
        policy["DefaultVersionId"] = self._find_version(policy, p["VersionId"])["VersionId"]
        policy["UpdateDate"] = now()
        self.table.put(policy["Arn"], policy)
