"""One handler per resource type: what CloudFormation's resource provider does, done with boto3
calls against the kinesim endpoint (Kinesis streams, Lambda functions and their event source
mappings, Firehose delivery streams, S3 buckets; IAM is accepted and ignored).

A handler turns a resource's resolved `Properties` into a normalised `desired` dict (the API's
names and types, defaults filled in) — the stack stores it and compares it on the next deploy —
and creates, updates in place, or deletes the resource. Which property changes need a
replacement comes from the resource's CloudFormation schema (its `createOnlyProperties`), as
shipped with cfn-lint; so do the attribute names `Fn::GetAtt` accepts.
"""
from __future__ import annotations

import hashlib
import io
import os
import random
import string
import time
import zipfile
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Callable, ClassVar

from botocore.exceptions import ClientError

from .intrinsics import pseudo_parameters
from .template import DeployError

# CloudFormation leaves a resource alone until it is stable (a stream ACTIVE, a function Active).
READY_TIMEOUT_S = 120.0


@dataclass
class Target:
    """Where and for whom resources are made."""
    kinesis: Any  # boto3 clients
    lambda_: Any
    stack_name: str
    region: str
    account_id: str
    partition: str
    template_dir: Path
    firehose: Any = None
    s3: Any = None  # path-style addressing: kinesim's buckets are not DNS names


@dataclass
class Applied:
    physical_id: str
    attributes: dict[str, Any]


@cache
def _schema(type_name: str) -> Any:
    """The CloudFormation resource schema of `type_name`, as cfn-lint ships it (None if unknown)."""
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER, ResourceNotFoundError

    try:
        return PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", type_name)
    except ResourceNotFoundError:
        return None


def create_only_properties(type_name: str) -> set[str]:
    """The top-level properties whose change replaces the resource (`createOnlyProperties`)."""
    schema = _schema(type_name)
    return {p.split("/")[2] for p in schema.schema.get("createOnlyProperties", [])} if schema else set()


def schema_attributes(type_name: str) -> set[str]:
    """The attribute names `Fn::GetAtt` accepts for the type (its schema's read-only properties)."""
    schema = _schema(type_name)
    return set(schema.get_atts) if schema else set()


def generated_name(stack_name: str, logical_id: str, max_length: int) -> str:
    """A physical name as CloudFormation makes one: `stack-LogicalId-RANDOMSUFFIX`, cut to fit."""
    suffix = "".join(random.choices(string.ascii_uppercase + string.digits, k=12))
    return f"{f'{stack_name}-{logical_id}'[:max_length - len(suffix) - 1]}-{suffix}"


def tag_map(tags: Any) -> dict[str, str]:
    """CloudFormation's `[{Key, Value}]` (or SAM's map) as the `{key: value}` the APIs take."""
    if isinstance(tags, dict):
        return {str(k): str(v) for k, v in tags.items()}
    return {str(t["Key"]): str(t["Value"]) for t in tags or []}


def wait_for(describe: Callable[[], Any], ready: Callable[[Any], bool], what: str) -> Any:
    """Poll until `ready(describe())`, backing off from 50 ms to 1 s."""
    deadline, delay = time.monotonic() + READY_TIMEOUT_S, 0.05
    while True:
        value = describe()
        if ready(value):
            return value
        if time.monotonic() > deadline:
            raise DeployError(f"{what} was not ready after {READY_TIMEOUT_S:.0f} s")
        time.sleep(delay)
        delay = min(delay * 2, 1.0)


def error_code(err: ClientError) -> str:
    return err.response.get("Error", {}).get("Code", "")


def unless_gone(call: Callable[[], Any]) -> Any | None:
    """`call()`'s response, or None when the service answers that the resource does not exist."""
    try:
        return call()
    except ClientError as err:
        if error_code(err) == "ResourceNotFoundException":
            return None
        raise


def delete_and_wait(delete: Callable[[], Any], describe: Callable[[], Any], what: str) -> None:
    """Delete a resource (already gone is fine), then wait until describing it answers that it does
    not exist: a replacement with the same name would conflict with it until then."""
    if unless_gone(delete) is not None:
        wait_for(lambda: unless_gone(describe), lambda found: found is None, f"deletion of {what}")


def coerce(shape: Any, value: Any) -> Any:
    """`value` converted to the botocore shape's types, as CloudFormation converts properties to
    their schema's types: a `Ref` to a Number parameter is the string "2" and ShardCount wants 2."""
    kind = shape.type_name
    if kind == "structure" and isinstance(value, dict):
        return {k: coerce(shape.members[k], v) if k in shape.members else v for k, v in value.items()}
    if kind == "list" and isinstance(value, list):
        return [coerce(shape.member, v) for v in value]
    if kind == "map" and isinstance(value, dict):
        return {str(k): coerce(shape.value, v) for k, v in value.items()}
    if kind in ("integer", "long") and isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            raise DeployError(f"{value!r} is not an integer") from None
    if kind in ("float", "double") and isinstance(value, str):
        return float(value)
    if kind == "boolean" and isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if kind == "string" and isinstance(value, bool):
        return "true" if value else "false"
    if kind == "string" and isinstance(value, (int, float)):
        return str(value)
    return value


def _input_shape(client: Any, operation: str) -> Any:
    return client.meta.service_model.operation_model(operation).input_shape


class ResourceHandler(ABC):
    """How one CloudFormation resource type is made, changed and removed through the service APIs;
    each type's handler implements the four abstract methods."""
    type_name: ClassVar[str]
    # The property that names the resource; CloudFormation generates a name when it is absent.
    name_property: ClassVar[str | None] = None
    name_max_length: ClassVar[int] = 64
    # Attributes this handler can give Fn::GetAtt (a subset of the schema's).
    attributes: ClassVar[frozenset[str]] = frozenset()
    # IAM and the like: recorded, given names and ARNs, but nothing is made.
    ignored: ClassVar[bool] = False
    note: ClassVar[str] = ""

    def __init__(self, target: Target):
        self.target = target

    @abstractmethod
    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        """The template's properties as they will be applied: checked, converted to the API's types."""

    def generate_name(self, logical_id: str) -> str:
        """The name CloudFormation gives a resource whose template names none."""
        return generated_name(self.target.stack_name, logical_id, self.name_max_length)

    def replacement_reasons(self, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
        """The changed properties that CloudFormation can only apply by replacing the resource."""
        return sorted(k for k in create_only_properties(self.type_name) if old.get(k) != new.get(k))

    @abstractmethod
    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        """Make the resource; its physical id and the attributes Fn::GetAtt gives."""

    @abstractmethod
    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        """Change the resource in place from `old` to `new`; its attributes afterwards."""

    @abstractmethod
    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        """Remove the resource; one that is already gone is not an error."""

    def _reject_unsupported(self, properties: dict[str, Any], supported: set[str]) -> None:
        unsupported = sorted(set(properties) - supported)
        if unsupported:
            raise DeployError(f"property {', '.join(unsupported)} of {self.type_name} is not supported by "
                              f"kinesim deploy (supported: {', '.join(sorted(supported))})")


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


class LambdaFunction(ResourceHandler):
    type_name = "AWS::Lambda::Function"
    name_property = "FunctionName"
    name_max_length = 64
    attributes = frozenset({"Arn"})
    # CloudFormation names that differ from the API's.
    RENAMED = {"KmsKeyArn": "KMSKeyArn"}
    # What UpdateFunctionConfiguration is sent when a property is removed from the template:
    # the API's defaults.
    RESET = {"Description": "", "Timeout": 3, "MemorySize": 128, "Environment": {"Variables": {}}, "Layers": [],
             "TracingConfig": {"Mode": "PassThrough"}, "DeadLetterConfig": {"TargetArn": ""}, "KMSKeyArn": "",
             "VpcConfig": {"SubnetIds": [], "SecurityGroupIds": []}, "FileSystemConfigs": [],
             "EphemeralStorage": {"Size": 512}, "SnapStart": {"ApplyOn": "None"}, "ImageConfig": {},
             "LoggingConfig": {"LogFormat": "Text"}}

    def __init__(self, target: Target):
        super().__init__(target)
        self._zips: dict[str, bytes] = {}  # sha256 -> zip, for the create/update after desired()

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        create_members = set(_input_shape(self.target.lambda_, "CreateFunction").members)
        supported = (create_members - {"Publish", "PublishTo"} - set(self.RENAMED.values())) | set(self.RENAMED) \
            | {"ReservedConcurrentExecutions"}
        self._reject_unsupported(properties, supported)
        request = {self.RENAMED.get(k, k): v for k, v in properties.items()
                   if k not in ("Code", "Tags", "ReservedConcurrentExecutions")}
        out = coerce(_input_shape(self.target.lambda_, "CreateFunction"), request)
        if "Code" not in properties:
            raise DeployError("property Code is required")
        out["Code"] = self._code(properties["Code"], str(properties.get("Runtime", "")))
        out["Tags"] = tag_map(properties.get("Tags"))
        if "ReservedConcurrentExecutions" in properties:
            out["ReservedConcurrentExecutions"] = int(properties["ReservedConcurrentExecutions"])
        return out

    def _code(self, code: Any, runtime: str) -> dict[str, Any]:
        """`Code` as compared between deploys: a zip built here is known by its sha256 (the zip
        itself is kept for the API call); S3 and image locations are kept as given."""
        if isinstance(code, str):  # a local directory or .zip (`aws cloudformation package` style)
            archive = package(self.target.template_dir / code)
        elif isinstance(code, dict) and "ZipFile" in code:  # inline source: CloudFormation names it index.*
            archive = inline_package(str(code["ZipFile"]), runtime)
        elif isinstance(code, dict):
            return {self.RENAMED.get(k, k): v for k, v in code.items()}
        else:
            raise DeployError(f"property Code must be a local path or a Code object, not {code!r}")
        sha = hashlib.sha256(archive).hexdigest()
        self._zips[sha] = archive
        return {"ZipSha256": sha}

    def _code_arguments(self, code: dict[str, Any]) -> dict[str, Any]:
        return {"ZipFile": self._zips[code["ZipSha256"]]} if "ZipSha256" in code else dict(code)

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        assert name
        request = {k: v for k, v in desired.items() if k not in ("Code", "Tags", "ReservedConcurrentExecutions")}
        request["FunctionName"] = name
        if desired["Tags"]:
            request["Tags"] = desired["Tags"]
        response = self.target.lambda_.create_function(Code=self._code_arguments(desired["Code"]), **request)
        try:
            self._wait(name, "State", "Pending")
            if "ReservedConcurrentExecutions" in desired:
                self.target.lambda_.put_function_concurrency(
                    FunctionName=name, ReservedConcurrentExecutions=desired["ReservedConcurrentExecutions"])
        except Exception:
            self.delete(name, desired)  # half made is not made, as for streams
            raise
        return Applied(name, {"Arn": response["FunctionArn"]})

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        lam = self.target.lambda_
        if old["Code"] != new["Code"] or old.get("Architectures") != new.get("Architectures"):
            extra = {"Architectures": new["Architectures"]} if "Architectures" in new else {}
            lam.update_function_code(FunctionName=physical_id, **self._code_arguments(new["Code"]), **extra)
            self._wait(physical_id, "LastUpdateStatus", "InProgress")
        config_members = set(_input_shape(lam, "UpdateFunctionConfiguration").members) - {"FunctionName", "RevisionId"}
        changed = {k for k in set(old) | set(new) if old.get(k) != new.get(k)}
        handled = config_members | {"Code", "Architectures", "Tags", "ReservedConcurrentExecutions", "FunctionName"}
        if changed - handled:
            raise DeployError(f"changing {', '.join(sorted(changed - handled))} of an existing function is not "
                              "supported by kinesim deploy; rename the function to replace it")
        config = {}
        for key in sorted(changed & config_members):
            if key not in new and key not in self.RESET:
                raise DeployError(f"removing {key} from a function is not supported; set it explicitly")
            config[key] = new.get(key, self.RESET.get(key))
        if config:
            lam.update_function_configuration(FunctionName=physical_id, **config)
            self._wait(physical_id, "LastUpdateStatus", "InProgress")
        arn = attributes["Arn"]
        removed_tags = sorted(set(old["Tags"]) - set(new["Tags"]))
        if removed_tags:
            lam.untag_resource(Resource=arn, TagKeys=removed_tags)
        changed_tags = {k: v for k, v in new["Tags"].items() if old["Tags"].get(k) != v}
        if changed_tags:
            lam.tag_resource(Resource=arn, Tags=changed_tags)
        if old.get("ReservedConcurrentExecutions") != new.get("ReservedConcurrentExecutions"):
            if "ReservedConcurrentExecutions" in new:
                lam.put_function_concurrency(FunctionName=physical_id,
                                             ReservedConcurrentExecutions=new["ReservedConcurrentExecutions"])
            else:
                lam.delete_function_concurrency(FunctionName=physical_id)
        return attributes

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        unless_gone(lambda: self.target.lambda_.delete_function(FunctionName=physical_id))

    def _wait(self, name: str, field: str, busy: str) -> None:
        """Wait while the function's `State` is Pending / `LastUpdateStatus` is InProgress, as
        CloudFormation does before the next call (which AWS would otherwise refuse)."""
        config = wait_for(lambda: self.target.lambda_.get_function_configuration(FunctionName=name),
                          lambda c: c.get(field) != busy, f"function {name}")
        if config.get(field) == "Failed":
            reason = config.get("StateReason") or config.get("LastUpdateStatusReason") or "no reason given"
            raise DeployError(f"function {name} failed: {reason}")


class EventSourceMapping(ResourceHandler):
    type_name = "AWS::Lambda::EventSourceMapping"
    attributes = frozenset({"Id", "EventSourceMappingArn"})
    RENAMED = {"KmsKeyArn": "KMSKeyArn"}
    # What UpdateEventSourceMapping is sent when a property is removed: the defaults for a
    # stream source.
    RESET = {"BatchSize": 100, "MaximumBatchingWindowInSeconds": 0, "Enabled": True, "FunctionResponseTypes": [],
             "ParallelizationFactor": 1, "MaximumRetryAttempts": -1, "MaximumRecordAgeInSeconds": -1,
             "BisectBatchOnFunctionError": False, "DestinationConfig": {"OnFailure": {}},
             "TumblingWindowInSeconds": 0, "FilterCriteria": {"Filters": []}}
    BUSY = ("Creating", "Enabling", "Disabling", "Updating")

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        shape = _input_shape(self.target.lambda_, "CreateEventSourceMapping")
        supported = (set(shape.members) - set(self.RENAMED.values())) | set(self.RENAMED)
        self._reject_unsupported(properties, supported)
        request = {self.RENAMED.get(k, k): v for k, v in properties.items() if k != "Tags"}
        out = coerce(shape, request)
        out["Tags"] = tag_map(properties.get("Tags"))
        return out

    def replacement_reasons(self, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
        # Besides the schema's create-only properties, whatever UpdateEventSourceMapping cannot
        # change (Topics, Queues, ...).
        updatable = set(_input_shape(self.target.lambda_, "UpdateEventSourceMapping").members) | {"Tags"}
        fixed = {k for k in set(old) | set(new) if k not in updatable and old.get(k) != new.get(k)}
        return sorted(set(super().replacement_reasons(old, new)) | fixed)

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        request = {k: v for k, v in desired.items() if k != "Tags"}
        if desired["Tags"]:
            request["Tags"] = desired["Tags"]
        response = self.target.lambda_.create_event_source_mapping(**request)
        uuid = response["UUID"]
        try:
            self._wait_stable(uuid)
        except Exception:
            self.delete(uuid, desired)  # half made is not made, as for streams
            raise
        arn = response.get("EventSourceMappingArn") or \
            f"arn:{self.target.partition}:lambda:{self.target.region}:{self.target.account_id}:event-source-mapping:{uuid}"
        return Applied(uuid, {"Id": uuid, "EventSourceMappingArn": arn})

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        lam = self.target.lambda_
        changes = {}
        for key in sorted(k for k in set(old) | set(new) if k != "Tags" and old.get(k) != new.get(k)):
            if key not in new and key not in self.RESET:
                raise DeployError(f"removing {key} from an event source mapping is not supported; set it explicitly")
            changes[key] = new.get(key, self.RESET.get(key))
        if changes:
            lam.update_event_source_mapping(UUID=physical_id, **changes)
            self._wait_stable(physical_id)
        arn = attributes["EventSourceMappingArn"]
        removed_tags = sorted(set(old["Tags"]) - set(new["Tags"]))
        if removed_tags:
            lam.untag_resource(Resource=arn, TagKeys=removed_tags)
        changed_tags = {k: v for k, v in new["Tags"].items() if old["Tags"].get(k) != v}
        if changed_tags:
            lam.tag_resource(Resource=arn, Tags=changed_tags)
        return attributes

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        # A mapping is Deleting for a while; a replacement for the same function and stream
        # would conflict with it until it is gone.
        lam = self.target.lambda_
        delete_and_wait(lambda: lam.delete_event_source_mapping(UUID=physical_id),
                        lambda: lam.get_event_source_mapping(UUID=physical_id),
                        f"event source mapping {physical_id}")

    def _wait_stable(self, uuid: str) -> None:
        wait_for(lambda: self.target.lambda_.get_event_source_mapping(UUID=uuid),
                 lambda m: m.get("State") not in self.BUSY, f"event source mapping {uuid}")


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


class IamResource(ResourceHandler):
    """IAM is not emulated: kinesim does not check permissions. The resources are accepted so
    that templates written for AWS deploy unchanged, and given the names and ARNs CloudFormation
    would give them (functions need a role ARN)."""
    ignored = True
    note = "IAM is not emulated: kinesim does not check permissions"
    id_prefix: ClassVar[str] = ""

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        return properties

    def _arn(self, kind: str, name: str, desired: dict[str, Any]) -> str:
        t = self.target
        return f"arn:{t.partition}:iam::{t.account_id}:{kind}{desired.get('Path', '/')}{name}"

    def _unique_id(self) -> str:
        return self.id_prefix + "".join(random.choices(string.ascii_uppercase + string.digits, k=17))

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        return attributes

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        pass


class IamRole(IamResource):
    type_name = "AWS::IAM::Role"
    name_property = "RoleName"
    attributes = frozenset({"Arn", "RoleId"})
    id_prefix = "AROA"

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        assert name
        return Applied(name, {"Arn": self._arn("role", name, desired), "RoleId": self._unique_id()})


class IamPolicy(IamResource):
    type_name = "AWS::IAM::Policy"
    name_property = None
    attributes = frozenset({"Id"})

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        physical_id = generated_name(self.target.stack_name, "Policy", 64)
        return Applied(physical_id, {"Id": physical_id})


class IamManagedPolicy(IamResource):
    type_name = "AWS::IAM::ManagedPolicy"
    name_property = "ManagedPolicyName"
    attributes = frozenset({"PolicyArn", "PolicyId"})
    id_prefix = "ANPA"

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        assert name
        arn = self._arn("policy", name, desired)  # Ref to a managed policy is its ARN
        return Applied(arn, {"PolicyArn": arn, "PolicyId": self._unique_id()})


HANDLERS: dict[str, type[ResourceHandler]] = {h.type_name: h for h in (
    KinesisStream, LambdaFunction, EventSourceMapping, FirehoseDeliveryStream, S3Bucket, IamRole, IamPolicy,
    IamManagedPolicy)}


# Function code


def package(path: Path) -> bytes:
    """A directory as a deployment package zip (the same bytes for the same files, so a
    redeploy of unchanged code changes nothing), or a `.zip` file as it is."""
    if path.is_file() and path.suffix == ".zip":
        return path.read_bytes()
    if not path.is_dir():
        raise DeployError(f"code path {path} is not a directory or a .zip file")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for filename in sorted(f for f in files if not f.endswith(".pyc")):
                file = Path(root) / filename
                _add(archive, file.relative_to(path).as_posix(), file.read_bytes(), file.stat().st_mode)
    return buffer.getvalue()


def inline_package(source: str, runtime: str) -> bytes:
    """Inline `ZipFile` source, zipped as CloudFormation does: into a file named index.py or
    index.js by runtime."""
    if runtime.startswith("python"):
        filename = "index.py"
    elif runtime.startswith("nodejs"):
        filename = "index.js"
    else:
        raise DeployError(f"inline code (Code.ZipFile) needs a Python or Node.js runtime, not {runtime!r}")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        _add(archive, filename, source.encode(), 0o644)
    return buffer.getvalue()


def _add(archive: zipfile.ZipFile, name: str, data: bytes, mode: int) -> None:
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))  # fixed: the zip's hash is the content's
    info.external_attr = ((mode & 0o777) | 0o100000) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, data)
