"""Lambda resources: AWS::Lambda::Function and AWS::Lambda::EventSourceMapping, and the
deployment packages made from a template's code paths and inline code."""
from __future__ import annotations

import hashlib
import io
import os
import zipfile
from pathlib import Path
from typing import Any, Iterable, Iterator

from .resources import (Applied, ResourceHandler, Target, _input_shape, coerce, delete_and_wait, local_code, tag_map, unless_gone, wait_for)
from .template import DeployError


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

    # Properties set by calls of their own after CreateFunction: reserved concurrency, and recursive
    # loop detection (RecursiveLoop: PutFunctionRecursionConfig; SAM passes it through from
    # AWS::Serverless::Function and its Globals).
    SEPARATE = ("ReservedConcurrentExecutions", "RecursiveLoop")

    def __init__(self, target: Target):
        super().__init__(target)
        self._zips: dict[str, bytes] = {}  # sha256 -> zip, for the create/update after desired()

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        create_members = set(_input_shape(self.target.lambda_, "CreateFunction").members)
        supported = (create_members - {"Publish", "PublishTo"} - set(self.RENAMED.values())) | set(self.RENAMED) \
            | set(self.SEPARATE)
        self._reject_unsupported(properties, supported)
        request = {self.RENAMED.get(k, k): v for k, v in properties.items()
                   if k not in ("Code", "Tags", *self.SEPARATE)}
        out = coerce(_input_shape(self.target.lambda_, "CreateFunction"), request)
        if "Code" not in properties:
            raise DeployError("property Code is required")
        out["Code"] = self._code(properties["Code"], str(properties.get("Runtime", "")))
        out["Tags"] = tag_map(properties.get("Tags"))
        if "ReservedConcurrentExecutions" in properties:
            out["ReservedConcurrentExecutions"] = int(properties["ReservedConcurrentExecutions"])
        if "RecursiveLoop" in properties:
            out["RecursiveLoop"] = str(properties["RecursiveLoop"])
        return out

    def _code(self, code: Any, runtime: str) -> dict[str, Any]:
        """`Code` as compared between deploys: a zip built here is known by its sha256 (the zip
        itself is kept for the API call); S3 and image locations are kept as given."""
        if isinstance(code, str):  # a local path: `aws cloudformation package` and kinesim deploy upload it first
            raise local_code(code)
        if isinstance(code, dict) and "ZipFile" in code:  # inline source: CloudFormation names it index.*
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
        request = {k: v for k, v in desired.items() if k not in ("Code", "Tags", *self.SEPARATE)}
        request["FunctionName"] = name
        if desired["Tags"]:
            request["Tags"] = desired["Tags"]
        response = self.target.lambda_.create_function(Code=self._code_arguments(desired["Code"]), **request)
        try:
            self._wait(name, "State", "Pending")
            if "ReservedConcurrentExecutions" in desired:
                self.target.lambda_.put_function_concurrency(
                    FunctionName=name, ReservedConcurrentExecutions=desired["ReservedConcurrentExecutions"])
            if "RecursiveLoop" in desired:
                self.target.lambda_.put_function_recursion_config(FunctionName=name,
                                                                  RecursiveLoop=desired["RecursiveLoop"])
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
        handled = config_members | {"Code", "Architectures", "Tags", "FunctionName", *self.SEPARATE}
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
        if old.get("RecursiveLoop") != new.get("RecursiveLoop"):  # removed: back to Lambda's default
            lam.put_function_recursion_config(FunctionName=physical_id,
                                              RecursiveLoop=new.get("RecursiveLoop", "Terminate"))
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
             "TumblingWindowInSeconds": 0, "FilterCriteria": {"Filters": []}, "ScalingConfig": {}}
    BUSY = ("Creating", "Enabling", "Disabling", "Updating")

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        shape = _input_shape(self.target.lambda_, "CreateEventSourceMapping")
        supported = (set(shape.members) - set(self.RENAMED.values())) | set(self.RENAMED)
        self._reject_unsupported(properties, supported)
        request = {self.RENAMED.get(k, k): v for k, v in properties.items() if k != "Tags"}
        endpoints = (request.get("SelfManagedEventSource") or {}).get("Endpoints")
        if isinstance(endpoints, dict) and "KafkaBootstrapServers" in endpoints:
            # CloudFormation's name for the API's KAFKA_BOOTSTRAP_SERVERS (the resource's
            # Endpoints property; SAM's SelfManagedKafka events write it so).
            endpoints = {("KAFKA_BOOTSTRAP_SERVERS" if k == "KafkaBootstrapServers" else k): v
                         for k, v in endpoints.items()}
            request["SelfManagedEventSource"] = {**request["SelfManagedEventSource"], "Endpoints": endpoints}
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
            changes[key] = new.get(key, self._reset(key, new))
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

    def _reset(self, key: str, new: dict[str, Any]) -> Any:
        """The value a removed property goes back to: AWS's default for the mapping's source."""
        if key == "BatchSize" and ":sqs:" in str(new.get("EventSourceArn", "")):
            return 10  # an SQS source's default (streams: 100)
        return self.RESET.get(key)

    def _wait_stable(self, uuid: str) -> None:
        wait_for(lambda: self.target.lambda_.get_event_source_mapping(UUID=uuid),
                 lambda m: m.get("State") not in self.BUSY, f"event source mapping {uuid}")




# Function code


def package(path: Path) -> bytes:
    """A directory as a deployment package zip (the same bytes for the same files, so a
    redeploy of unchanged code changes nothing), or a `.zip` file as it is."""
    if path.is_file() and path.suffix == ".zip":
        return path.read_bytes()
    if not path.is_dir():
        raise DeployError(f"code path {path} is not a directory or a .zip file")

    def files() -> Iterator[tuple[str, Path]]:
        for root, dirs, names in os.walk(path):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for filename in sorted(f for f in names if not f.endswith(".pyc")):
                file = Path(root) / filename
                yield file.relative_to(path).as_posix(), file
    return zip_files(files())


def zip_files(files: Iterable[tuple[str, Path]]) -> bytes:
    """A deployment package of (name in the zip, file) pairs, the same bytes for the same files."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, file in files:
            _add(archive, name, file.read_bytes(), file.stat().st_mode)
    return buffer.getvalue()


# What CloudFormation puts beside inline code for custom resource providers: the cfnresponse
# (Python) and cfn-response (Node.js) modules, "available only when you use the ZipFile property".
_CFN_RESPONSE = Path(__file__).parent / "cfn_response"


def inline_package(source: str, runtime: str) -> bytes:
    """Inline `ZipFile` source, zipped as CloudFormation does: into a file named index.py or
    index.js by runtime, with the module that answers custom resource requests."""
    if runtime.startswith("python"):
        files = {"index.py": source.encode(), "cfnresponse/__init__.py": (_CFN_RESPONSE / "cfnresponse.py").read_bytes()}
    elif runtime.startswith("nodejs"):
        files = {"index.js": source.encode(),
                 "node_modules/cfn-response/index.js": (_CFN_RESPONSE / "cfn-response.js").read_bytes()}
    else:
        raise DeployError(f"inline code (Code.ZipFile) needs a Python or Node.js runtime, not {runtime!r}")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            _add(archive, name, data, 0o644)
    return buffer.getvalue()


def _add(archive: zipfile.ZipFile, name: str, data: bytes, mode: int) -> None:
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))  # fixed: the zip's hash is the content's
    info.external_attr = ((mode & 0o777) | 0o100000) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, data)
