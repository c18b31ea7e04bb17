"""One handler per resource type: what CloudFormation's resource provider does, done with boto3
calls against the kinesim endpoint (Kinesis streams, Lambda functions and their event source
mappings, Firehose delivery streams, S3 buckets, IAM roles and policies).

A handler turns a resource's resolved `Properties` into a normalised `desired` dict (the API's
names and types, defaults filled in) — the stack stores it and compares it on the next deploy —
and creates, updates in place, or deletes the resource. Which property changes need a
replacement comes from the resource's CloudFormation schema (its `createOnlyProperties`), as
shipped with cfn-lint; so do the attribute names `Fn::GetAtt` accepts.

This module has what every handler shares; the handlers live in one module per service
(`kinesis_resources`, `lambda_resources`, ...), and `handlers.HANDLERS` is the table of them.
"""
from __future__ import annotations

import random
import re
import string
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cache
from typing import Any, Callable, ClassVar

from botocore.exceptions import ClientError

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
    firehose: Any = None
    s3: Any = None  # path-style addressing: kinesim's buckets are not DNS names
    logs: Any = None
    sqs: Any = None
    sns: Any = None
    cloudformation: Any = None
    ecr: Any = None
    ssm: Any = None
    iam: Any = None
    # (stack name, seconds) -> whether an operation was under way on that stack: waits for it to
    # end, up to the seconds (the server's own CloudFormation, in process). None: poll only.
    await_stack: Callable[[str, float], bool] | None = None
    # Where custom resource providers' answers arrive (the server's CloudFormation). None: there
    # is no ResponseURL to give, and custom resources cannot be made.
    custom_resources: Any = None


# The services whose clients a Target has (`lambda` is the field `lambda_`).
CLIENTS = ("kinesis", "lambda", "firehose", "s3", "logs", "sqs", "sns", "ecr", "cloudformation", "ssm", "iam")


def service_clients(endpoint_url: str, region: str, credentials: dict[str, str]) -> dict[str, Any]:
    """boto3 clients of every service in CLIENTS, for `endpoint_url` (S3 path-style: kinesim's
    buckets are not host names)."""
    import boto3
    from botocore.config import Config

    session = boto3.Session(region_name=region)
    config = Config(retries={"max_attempts": 3, "mode": "standard"})
    clients = {name: session.client(name, endpoint_url=endpoint_url, config=config, **credentials)
               for name in CLIENTS if name != "s3"}
    clients["s3"] = session.client("s3", endpoint_url=endpoint_url, **credentials,
                                   config=config.merge(Config(s3={"addressing_style": "path"})))
    return clients


def target_for(clients: dict[str, Any], **fields: Any) -> "Target":
    """A Target over `clients` (as service_clients makes them)."""
    return Target(kinesis=clients["kinesis"], lambda_=clients["lambda"], **fields,
                  **{name: client for name, client in clients.items() if name not in ("kinesis", "lambda")})


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


class AttributeNames(frozenset):
    """Attribute names, some of them patterns: cfn-lint gives a nested stack's outputs
    (`Fn::GetAtt Child.Outputs.Key`) as the one name `Outputs\\..*`, a regular expression."""

    def __contains__(self, name: object) -> bool:
        return frozenset.__contains__(self, name) or isinstance(name, str) and any(
            "\\" in pattern and re.fullmatch(pattern, name) for pattern in self)


def schema_attributes(type_name: str) -> AttributeNames:
    """The attribute names `Fn::GetAtt` accepts for the type (its schema's read-only properties)."""
    schema = _schema(type_name)
    return AttributeNames(schema.get_atts if schema else ())


def local_code(path: str) -> DeployError:
    """A local code path sent to the server. It reads nothing of its own disk for a client: code
    is in S3 (`sam deploy`, `aws cloudformation package` and `kinesim deploy` upload it)."""
    return DeployError(f"code location {path!r} is a local path: upload the code to S3 first (sam deploy, "
                       "aws cloudformation package and kinesim deploy do) and give its S3Bucket and S3Key")


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
    # Resource policies and the like: recorded, given names and ARNs, but nothing is made.
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

    def update_resource(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
                        attributes: dict[str, Any]) -> Applied:
        """`update`, for the engine: a custom resource's provider may answer an update with a new
        physical id (a replacement, whose old resource the clean-up phase deletes)."""
        return Applied(physical_id, self.update(physical_id, old, new, attributes))

    @abstractmethod
    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        """Remove the resource; one that is already gone is not an error."""

    def _reject_unsupported(self, properties: dict[str, Any], supported: set[str]) -> None:
        unsupported = sorted(set(properties) - supported)
        if unsupported:
            raise DeployError(f"property {', '.join(unsupported)} of {self.type_name} is not supported by "
                              f"kinesim deploy (supported: {', '.join(sorted(supported))})")


class RecordedResource(ResourceHandler):
    """A resource kinesim accepts and records but does not make (what it stands for is not
    emulated, or not enforced: resource policies, CodeDeploy): the template deploys unchanged, and
    the resource gets the names and ids CloudFormation would give it. Subclasses say why in `note`."""
    ignored = True

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        return properties

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        return attributes

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        pass
