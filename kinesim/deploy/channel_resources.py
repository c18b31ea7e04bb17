"""AWS::Kinesis::Channel: a Kinesis channel (CreateChannel) delivering a stream into S3.

Its properties are CreateChannel's (Tags as CloudFormation's `[{Key, Value}]`); `Ref` is the
channel's ARN, the schema's primary identifier. What UpdateChannel can change
(S3DestinationConfiguration.DataFreshnessInSeconds, LoggingConfiguration) is updated in place;
the schema's create-only properties, nested ones included, replace the channel. kinesim has no
tag calls for channels, so a change of Tags replaces it too.
"""
from __future__ import annotations

import copy
from datetime import datetime, timezone
from typing import Any

from .resources import Applied, ResourceHandler, _input_shape, coerce, delete_and_wait, tag_map, wait_for
from .template import DeployError

# The schema's createOnlyProperties, as paths into the properties.
_CREATE_ONLY = (("ChannelName",), ("ServiceExecutionRoleARN",), ("StreamConfigurationList",),
                ("EncryptionConfiguration",), ("S3DestinationConfiguration", "StorageConfiguration"),
                ("S3DestinationConfiguration", "DeadLetterQueueS3Configuration"),
                ("S3TablesDestinationConfiguration", "S3TablesConfigurationList"),
                ("S3TablesDestinationConfiguration", "DeadLetterQueueS3Configuration"), ("Tags",))


def _at(value: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


class KinesisChannel(ResourceHandler):
    type_name = "AWS::Kinesis::Channel"
    name_property = "ChannelName"
    name_max_length = 128
    attributes = frozenset({"ChannelARN", "ChannelId", "ChannelStatus", "ChannelCreationTimestamp"})
    SUPPORTED = {"ChannelName", "ServiceExecutionRoleARN", "StreamConfigurationList", "S3DestinationConfiguration",
                 "S3TablesDestinationConfiguration", "EncryptionConfiguration", "LoggingConfiguration", "Tags"}

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, self.SUPPORTED)
        shape = _input_shape(self.target.kinesis, "CreateChannel")
        out = {k: coerce(shape.members[k], v) for k, v in properties.items() if k != "Tags"}
        out["Tags"] = tag_map(properties.get("Tags"))
        return out

    def replacement_reasons(self, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
        return sorted(".".join(path) for path in _CREATE_ONLY if _at(old, path) != _at(new, path))

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        assert name
        request = {k: copy.deepcopy(v) for k, v in desired.items() if k not in ("ChannelName", "Tags")}
        if desired["Tags"]:
            request["Tags"] = desired["Tags"]
        arn = self.target.kinesis.create_channel(ChannelName=name, **request)["ChannelDescription"]["ChannelARN"]
        try:
            description = self._wait_settled(arn)
        except Exception:
            self.delete(arn, desired)  # half made is not made: CloudFormation rolls back
            raise
        return Applied(arn, self._attributes(description))

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        request: dict[str, Any] = {}
        freshness = _at(new, ("S3DestinationConfiguration", "DataFreshnessInSeconds"))
        if freshness != _at(old, ("S3DestinationConfiguration", "DataFreshnessInSeconds")):
            request["S3DestinationConfiguration"] = {"DataFreshnessInSeconds": freshness or 300}  # the default
        if new.get("LoggingConfiguration") != old.get("LoggingConfiguration"):
            request["LoggingConfiguration"] = new.get("LoggingConfiguration") or {"CloudWatchLogs": {"Enabled": False}}
        if not request:
            return attributes
        self.target.kinesis.update_channel(ChannelARN=physical_id, **request)
        return self._attributes(self._wait_settled(physical_id))

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        kinesis = self.target.kinesis
        delete_and_wait(lambda: kinesis.delete_channel(ChannelARN=physical_id),
                        lambda: kinesis.describe_channel(ChannelARN=physical_id), f"channel {physical_id}")

    def _wait_settled(self, arn: str) -> dict[str, Any]:
        description = wait_for(lambda: self.target.kinesis.describe_channel(ChannelARN=arn)["ChannelDescription"],
                               lambda d: d["ChannelStatus"] in ("ACTIVE", "FAILED"), f"channel {arn}")
        if description["ChannelStatus"] == "FAILED":
            raise DeployError(f"channel {description['ChannelName']} FAILED: {description.get('ChannelStatusReason')}")
        return description

    @staticmethod
    def _attributes(description: dict[str, Any]) -> dict[str, Any]:
        created = description["ChannelCreationTimestamp"]
        if isinstance(created, datetime):
            created = created.astimezone(timezone.utc).isoformat()
        return {"ChannelARN": description["ChannelARN"], "ChannelId": description["ChannelId"],
                "ChannelStatus": description["ChannelStatus"], "ChannelCreationTimestamp": str(created)}
