"""Kinesis resources: AWS::Kinesis::Stream and AWS::Kinesis::StreamConsumer."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from .resources import (Applied, ResourceHandler, delete_and_wait, tag_map, wait_for)
from .template import DeployError


class KinesisStream(ResourceHandler):
    type_name = "AWS::Kinesis::Stream"
    name_property = "Name"
    name_max_length = 128
    attributes = frozenset({"Arn"})
    SUPPORTED = {"Name", "ShardCount", "RetentionPeriodHours", "StreamModeDetails", "StreamEncryption", "Tags",
                 "DesiredShardLevelMetrics", "MaxRecordSizeInKiB"}

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, self.SUPPORTED)
        mode = (properties.get("StreamModeDetails") or {}).get("StreamMode", "PROVISIONED")

        def integer(name: str, default: int | None) -> int | None:
            value = properties.get(name, default)
            try:
                return None if value is None else int(value)
            except (TypeError, ValueError):
                raise DeployError(f"property {name} must be an integer, not {value!r}") from None

        return {
            "Name": properties.get("Name"),
            "StreamMode": mode,
            # CloudFormation's default for a provisioned stream is one shard.
            "ShardCount": integer("ShardCount", 1) if mode == "PROVISIONED" else None,
            "RetentionPeriodHours": integer("RetentionPeriodHours", 24),
            "StreamEncryption": properties.get("StreamEncryption"),
            "Tags": tag_map(properties.get("Tags")),
            "DesiredShardLevelMetrics": sorted(properties.get("DesiredShardLevelMetrics") or []),
            "MaxRecordSizeInKiB": integer("MaxRecordSizeInKiB", None),
        }

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        assert name
        request: dict[str, Any] = {"StreamName": name}
        if desired["StreamMode"] == "ON_DEMAND":
            request["StreamModeDetails"] = {"StreamMode": "ON_DEMAND"}
        else:
            request["ShardCount"] = desired["ShardCount"]
        if desired["Tags"]:
            request["Tags"] = desired["Tags"]
        self.target.kinesis.create_stream(**request)
        try:
            arn = self._wait_active(name)["StreamARN"]
            blank = {"RetentionPeriodHours": 24, "StreamEncryption": None, "Tags": desired["Tags"],
                     "DesiredShardLevelMetrics": [], "MaxRecordSizeInKiB": None}
            self._apply_settings(name, arn, blank, desired)
        except Exception:
            # Half made is not made: remove it (CloudFormation rolls back) so the next deploy
            # can create it afresh.
            self.delete(name, desired)
            raise
        return Applied(name, {"Arn": arn})

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        kinesis, arn = self.target.kinesis, attributes["Arn"]
        if old["StreamMode"] != new["StreamMode"]:
            kinesis.update_stream_mode(StreamARN=arn, StreamModeDetails={"StreamMode": new["StreamMode"]})
            self._wait_active(physical_id)
        if new["StreamMode"] == "PROVISIONED":
            current = kinesis.describe_stream_summary(StreamName=physical_id)["StreamDescriptionSummary"]
            if current["OpenShardCount"] != new["ShardCount"]:
                kinesis.update_shard_count(StreamName=physical_id, TargetShardCount=new["ShardCount"],
                                           ScalingType="UNIFORM_SCALING")
                self._wait_active(physical_id)
        self._apply_settings(physical_id, arn, old, new)
        return attributes

    def _apply_settings(self, name: str, arn: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        kinesis = self.target.kinesis
        if new["RetentionPeriodHours"] > old["RetentionPeriodHours"]:
            kinesis.increase_stream_retention_period(StreamName=name, RetentionPeriodHours=new["RetentionPeriodHours"])
        elif new["RetentionPeriodHours"] < old["RetentionPeriodHours"]:
            kinesis.decrease_stream_retention_period(StreamName=name, RetentionPeriodHours=new["RetentionPeriodHours"])
        if new["StreamEncryption"] != old["StreamEncryption"]:
            if old["StreamEncryption"]:
                kinesis.stop_stream_encryption(StreamName=name, **old["StreamEncryption"])
                self._wait_active(name)
            if new["StreamEncryption"]:
                kinesis.start_stream_encryption(StreamName=name, **new["StreamEncryption"])
        removed_tags = sorted(set(old["Tags"]) - set(new["Tags"]))
        if removed_tags:
            kinesis.remove_tags_from_stream(StreamName=name, TagKeys=removed_tags)
        changed_tags = {k: v for k, v in new["Tags"].items() if old["Tags"].get(k) != v}
        if changed_tags:
            kinesis.add_tags_to_stream(StreamName=name, Tags=changed_tags)
        disabled = sorted(set(old["DesiredShardLevelMetrics"]) - set(new["DesiredShardLevelMetrics"]))
        if disabled:
            kinesis.disable_enhanced_monitoring(StreamName=name, ShardLevelMetrics=disabled)
        enabled = sorted(set(new["DesiredShardLevelMetrics"]) - set(old["DesiredShardLevelMetrics"]))
        if enabled:
            kinesis.enable_enhanced_monitoring(StreamName=name, ShardLevelMetrics=enabled)
        if new["MaxRecordSizeInKiB"] is not None and new["MaxRecordSizeInKiB"] != old["MaxRecordSizeInKiB"]:
            kinesis.update_max_record_size(StreamARN=arn, MaxRecordSizeInKiB=new["MaxRecordSizeInKiB"])
        self._wait_active(name)

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        kinesis = self.target.kinesis
        delete_and_wait(lambda: kinesis.delete_stream(StreamName=physical_id, EnforceConsumerDeletion=True),
                        lambda: kinesis.describe_stream_summary(StreamName=physical_id), f"stream {physical_id}")

    def _wait_active(self, name: str) -> dict[str, Any]:
        def describe() -> dict[str, Any]:
            return self.target.kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]

        return wait_for(describe, lambda s: s["StreamStatus"] == "ACTIVE", f"stream {name}")


class KinesisStreamConsumer(ResourceHandler):
    """An enhanced fan-out consumer (RegisterStreamConsumer). Every property is create-only in its
    CloudFormation schema, so any change replaces it. `Ref` gives its ARN (the schema's primary
    identifier), which is also what an event source mapping takes as EventSourceArn."""
    type_name = "AWS::Kinesis::StreamConsumer"
    attributes = frozenset({"ConsumerARN", "ConsumerName", "ConsumerStatus", "ConsumerCreationTimestamp",
                            "StreamARN"})
    SUPPORTED = {"ConsumerName", "StreamARN", "Tags"}

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, self.SUPPORTED)
        for required in ("ConsumerName", "StreamARN"):
            if not isinstance(properties.get(required), str) or not properties[required]:
                raise DeployError(f"property {required} is required")
        return {"ConsumerName": properties["ConsumerName"], "StreamARN": properties["StreamARN"],
                "Tags": tag_map(properties.get("Tags"))}

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        request: dict[str, Any] = {"StreamARN": desired["StreamARN"], "ConsumerName": desired["ConsumerName"]}
        if desired["Tags"]:
            request["Tags"] = desired["Tags"]
        arn = self.target.kinesis.register_stream_consumer(**request)["Consumer"]["ConsumerARN"]
        try:
            description = self._wait_active(arn)
        except Exception:
            self.delete(arn, desired)  # half made is not made, as for streams
            raise
        return Applied(arn, self._attributes(description))

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        return attributes  # nothing is updatable in place: every change is a replacement

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        kinesis = self.target.kinesis
        delete_and_wait(lambda: kinesis.deregister_stream_consumer(ConsumerARN=physical_id),
                        lambda: kinesis.describe_stream_consumer(ConsumerARN=physical_id),
                        f"stream consumer {physical_id}")

    def _wait_active(self, arn: str) -> dict[str, Any]:
        def describe() -> dict[str, Any]:
            return self.target.kinesis.describe_stream_consumer(ConsumerARN=arn)["ConsumerDescription"]

        return wait_for(describe, lambda d: d["ConsumerStatus"] == "ACTIVE", f"stream consumer {arn}")

    @staticmethod
    def _attributes(description: dict[str, Any]) -> dict[str, Any]:
        created = description["ConsumerCreationTimestamp"]
        if isinstance(created, datetime):  # the schema's attribute is a string: ISO 8601, in UTC
            created = created.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {"ConsumerARN": description["ConsumerARN"], "ConsumerName": description["ConsumerName"],
                "ConsumerStatus": description["ConsumerStatus"], "ConsumerCreationTimestamp": str(created),
                "StreamARN": description["StreamARN"]}
