"""CloudWatch Logs resources: AWS::Logs::LogGroup, AWS::Logs::LogStream."""
from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from .resources import Applied, ResourceHandler, error_code, tag_map, unless_gone
from .template import DeployError

_FUNCTION_GROUP = "/aws/lambda/"


class LogsLogGroup(ResourceHandler):
    """AWS::Logs::LogGroup. A template commonly declares `/aws/lambda/<its function>` to set the
    retention of the function's logs. Whichever comes first, the group or the function's first log
    line (which makes the group, as on AWS), the deploy ends with one group holding the template's
    settings: a function's group that already exists is taken over rather than refused."""
    type_name = "AWS::Logs::LogGroup"
    name_property = "LogGroupName"
    name_max_length = 512
    attributes = frozenset({"Arn"})
    SUPPORTED = {"LogGroupName", "RetentionInDays", "Tags", "KmsKeyId", "LogGroupClass", "DeletionProtectionEnabled"}

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, self.SUPPORTED)
        retention = properties.get("RetentionInDays")
        try:
            retention = None if retention is None else int(retention)
        except (TypeError, ValueError):
            raise DeployError(f"property RetentionInDays must be an integer, not {retention!r}") from None
        return {"LogGroupName": properties.get("LogGroupName"), "RetentionInDays": retention,
                "Tags": tag_map(properties.get("Tags")), "KmsKeyId": properties.get("KmsKeyId"),
                "LogGroupClass": properties.get("LogGroupClass"),
                "DeletionProtectionEnabled": _boolean(properties.get("DeletionProtectionEnabled"))}

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        assert name
        logs = self.target.logs
        request: dict[str, Any] = {"logGroupName": name}
        for prop, member in (("KmsKeyId", "kmsKeyId"), ("LogGroupClass", "logGroupClass"),
                             ("DeletionProtectionEnabled", "deletionProtectionEnabled")):
            if desired[prop] is not None:
                request[member] = desired[prop]
        if desired["Tags"]:
            request["tags"] = desired["Tags"]
        try:
            logs.create_log_group(**request)
            made = True
        except ClientError as err:
            if error_code(err) != "ResourceAlreadyExistsException" or not name.startswith(_FUNCTION_GROUP):
                raise
            made = False  # the function logged first: its group becomes this resource
        try:
            blank = {"RetentionInDays": None, "Tags": desired["Tags"] if made else self._tags(name),
                     "DeletionProtectionEnabled": desired["DeletionProtectionEnabled"] if made else None}
            self._apply(name, blank, desired)
        except Exception:
            if made:  # half made is not made: the next deploy creates it afresh
                unless_gone(lambda: logs.delete_log_group(logGroupName=name))
            raise
        return Applied(name, {"Arn": self._arn(name)})

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        self._apply(physical_id, old, new)
        return attributes

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        unless_gone(lambda: self.target.logs.delete_log_group(logGroupName=physical_id))

    def _apply(self, name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        logs = self.target.logs
        if new["RetentionInDays"] != old["RetentionInDays"]:
            if new["RetentionInDays"] is None:
                logs.delete_retention_policy(logGroupName=name)
            else:
                logs.put_retention_policy(logGroupName=name, retentionInDays=new["RetentionInDays"])
        protect = bool(new["DeletionProtectionEnabled"])  # a removed property is CloudFormation's default, off
        if protect != bool(old.get("DeletionProtectionEnabled")):
            logs.put_log_group_deletion_protection(logGroupIdentifier=name, deletionProtectionEnabled=protect)
        arn = self._arn(name)[:-2]
        removed = sorted(set(old["Tags"]) - set(new["Tags"]))
        if removed:
            logs.untag_resource(resourceArn=arn, tagKeys=removed)
        changed = {k: v for k, v in new["Tags"].items() if old["Tags"].get(k) != v}
        if changed:
            logs.tag_resource(resourceArn=arn, tags=changed)

    def _tags(self, name: str) -> dict[str, str]:
        return self.target.logs.list_tags_log_group(logGroupName=name).get("tags", {})

    def _arn(self, name: str) -> str:
        # Fn::GetAtt Arn is the log group's ARN with `:*`, as CloudFormation gives it.
        t = self.target
        return f"arn:{t.partition}:logs:{t.region}:{t.account_id}:log-group:{name}:*"


class LogsLogStream(ResourceHandler):
    """AWS::Logs::LogStream: a stream of a log group (Ref: its name)."""
    type_name = "AWS::Logs::LogStream"
    name_property = "LogStreamName"
    name_max_length = 512
    SUPPORTED = {"LogGroupName", "LogStreamName"}

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, self.SUPPORTED)
        if not properties.get("LogGroupName"):
            raise DeployError("property LogGroupName is required")
        return {"LogGroupName": str(properties["LogGroupName"]), "LogStreamName": properties.get("LogStreamName")}

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        assert name
        self.target.logs.create_log_stream(logGroupName=desired["LogGroupName"], logStreamName=name)
        return Applied(name, {})

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        return attributes  # both properties are create-only: a change replaces the stream

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        unless_gone(lambda: self.target.logs.delete_log_stream(logGroupName=desired["LogGroupName"],
                                                               logStreamName=physical_id))


def _boolean(value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise DeployError(f"property DeletionProtectionEnabled must be a boolean, not {value!r}")
