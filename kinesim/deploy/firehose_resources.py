"""Firehose resources: AWS::KinesisFirehose::DeliveryStream."""
from __future__ import annotations

from typing import Any

from .resources import (Applied, ResourceHandler, _input_shape, coerce, delete_and_wait, tag_map, wait_for)
from .template import DeployError


class FirehoseDeliveryStream(ResourceHandler):
    """AWS::KinesisFirehose::DeliveryStream to Amazon S3, the destination kinesim has. The
    template's property names are CreateDeliveryStream's member names, so the properties go to
    the API as they are, converted to its types."""
    type_name = "AWS::KinesisFirehose::DeliveryStream"
    name_property = "DeliveryStreamName"
    name_max_length = 64
    attributes = frozenset({"Arn"})
    DESTINATIONS = ("ExtendedS3DestinationConfiguration", "S3DestinationConfiguration")
    SUPPORTED = {"DeliveryStreamName", "DeliveryStreamType", "DirectPutSourceConfiguration",
                 "KinesisStreamSourceConfiguration", "DeliveryStreamEncryptionConfigurationInput", "Tags",
                 *DESTINATIONS}
    # What UpdateDestination is sent for a destination member that left the template: the value
    # that means "not set" (UpdateDestination keeps the current value of a member it is not given).
    RESET = {"Prefix": "", "ErrorOutputPrefix": "", "CompressionFormat": "UNCOMPRESSED",
             "EncryptionConfiguration": {"NoEncryptionConfig": "NoEncryption"},
             "CloudWatchLoggingOptions": {"Enabled": False}, "ProcessingConfiguration": {"Enabled": False},
             "DataFormatConversionConfiguration": {"Enabled": False},
             "DynamicPartitioningConfiguration": {"Enabled": False}, "FileExtension": "", "CustomTimeZone": "",
             "S3BackupMode": "Disabled"}
    # BufferingHints' defaults (SizeInMBs is 64 with dynamic partitioning).
    INTERVAL_S, SIZE_MB, PARTITIONED_SIZE_MB = 300, 5, 64

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        others = sorted(k for k in set(properties) - self.SUPPORTED if k.endswith("DestinationConfiguration"))
        if others:
            raise DeployError(f"property {', '.join(others)} of {self.type_name} is not supported by kinesim "
                              f"deploy: kinesim delivers to Amazon S3 only ({' or '.join(self.DESTINATIONS)})")
        self._reject_unsupported(properties, self.SUPPORTED)
        if sum(k in properties for k in self.DESTINATIONS) != 1:
            raise DeployError(f"exactly one of {' and '.join(self.DESTINATIONS)} is required")
        shape = _input_shape(self.target.firehose, "CreateDeliveryStream")
        out = coerce(shape, {k: v for k, v in properties.items() if k != "Tags"})
        out.setdefault("DeliveryStreamName", None)
        out.setdefault("DeliveryStreamType", "DirectPut")  # CreateDeliveryStream's default
        out["Tags"] = tag_map(properties.get("Tags"))
        return out

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        assert name
        request = {k: v for k, v in desired.items() if k != "Tags" and v is not None}
        request["DeliveryStreamName"] = name
        if desired["Tags"]:
            request["Tags"] = [{"Key": k, "Value": v} for k, v in desired["Tags"].items()]
        arn = self.target.firehose.create_delivery_stream(**request)["DeliveryStreamARN"]
        try:
            self._wait_active(name)
        except Exception:
            self.delete(name, desired)  # half made is not made, as for streams
            raise
        return Applied(name, {"Arn": arn})

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        # Name, type and source are create-only (a change replaces the delivery stream); the
        # destination, the encryption and the tags are updated in place, as CloudFormation does.
        firehose = self.target.firehose
        old_destination, new_destination = self._destination(old), self._destination(new)
        if old_destination != new_destination:
            description = self._wait_active(physical_id)
            # An S3 destination is kept in the extended form too (DescribeDeliveryStream shows
            # both), and S3DestinationConfiguration's members are a subset of the extended ones:
            # the extended update applies to either.
            firehose.update_destination(DeliveryStreamName=physical_id,
                                        CurrentDeliveryStreamVersionId=description["VersionId"],
                                        DestinationId=description["Destinations"][0]["DestinationId"],
                                        ExtendedS3DestinationUpdate=self.destination_update(old_destination,
                                                                                            new_destination))
        encryption = "DeliveryStreamEncryptionConfigurationInput"
        if old.get(encryption) != new.get(encryption):
            if new.get(encryption):
                firehose.start_delivery_stream_encryption(DeliveryStreamName=physical_id,
                                                          DeliveryStreamEncryptionConfigurationInput=new[encryption])
            else:
                firehose.stop_delivery_stream_encryption(DeliveryStreamName=physical_id)
        removed_tags = sorted(set(old["Tags"]) - set(new["Tags"]))
        if removed_tags:
            firehose.untag_delivery_stream(DeliveryStreamName=physical_id, TagKeys=removed_tags)
        changed_tags = {k: v for k, v in new["Tags"].items() if old["Tags"].get(k) != v}
        if changed_tags:
            firehose.tag_delivery_stream(DeliveryStreamName=physical_id,
                                         Tags=[{"Key": k, "Value": v} for k, v in changed_tags.items()])
        self._wait_active(physical_id)
        return attributes

    def _destination(self, desired: dict[str, Any]) -> dict[str, Any]:
        return next(desired[k] for k in self.DESTINATIONS if k in desired)

    @classmethod
    def destination_update(cls, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        """An ExtendedS3DestinationUpdate that makes a destination configured as `old` one
        configured as `new`: what `new` sets, and the "not set" value of what it left out."""
        dynamic = bool((new.get("DynamicPartitioningConfiguration") or {}).get("Enabled"))
        update = cls._with_resets(old, new, cls.PARTITIONED_SIZE_MB if dynamic else cls.SIZE_MB)
        backup = update.pop("S3BackupConfiguration", None)
        if backup is not None:
            update["S3BackupUpdate"] = cls._with_resets(old.get("S3BackupConfiguration") or {}, backup, cls.SIZE_MB)
        return update

    @classmethod
    def _with_resets(cls, old: dict[str, Any], new: dict[str, Any], size_mb: int) -> dict[str, Any]:
        out = dict(new)
        for key in sorted(set(old) - set(new) - {"BufferingHints", "S3BackupConfiguration"}):
            if key not in cls.RESET:
                raise DeployError(f"removing {key} from a delivery stream's destination is not supported; "
                                  "set it explicitly")
            out[key] = cls.RESET[key]
        # UpdateDestination merges BufferingHints member by member: send both, defaults filled in.
        hints = new.get("BufferingHints") or {}
        out["BufferingHints"] = {"SizeInMBs": hints.get("SizeInMBs", size_mb),
                                 "IntervalInSeconds": hints.get("IntervalInSeconds", cls.INTERVAL_S)}
        return out

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        delete_and_wait(lambda: self.target.firehose.delete_delivery_stream(DeliveryStreamName=physical_id),
                        lambda: self._describe(physical_id), f"delivery stream {physical_id}")

    def _describe(self, name: str) -> dict[str, Any]:
        return self.target.firehose.describe_delivery_stream(DeliveryStreamName=name)["DeliveryStreamDescription"]

    def _wait_active(self, name: str) -> dict[str, Any]:
        """Wait while the delivery stream is CREATING or its encryption ENABLING / DISABLING."""
        def settled(d: dict[str, Any]) -> bool:
            encryption = (d.get("DeliveryStreamEncryptionConfiguration") or {}).get("Status")
            return d["DeliveryStreamStatus"] != "CREATING" and encryption not in ("ENABLING", "DISABLING")

        description = wait_for(lambda: self._describe(name), settled, f"delivery stream {name}")
        if description["DeliveryStreamStatus"] != "ACTIVE":
            reason = (description.get("FailureDescription") or {}).get("Details") or "no reason given"
            raise DeployError(f"delivery stream {name} is {description['DeliveryStreamStatus']}: {reason}")
        return description
