"""Template parameters whose values live in Systems Manager Parameter Store.

A parameter of type `AWS::SSM::Parameter::Value<T>` is given (or defaults to) the *name* of an SSM
parameter; CloudFormation reads that parameter's current value when the stack is created or
updated, and the template's `Ref` gives the value, as a list for list types (`List<String>`,
`CommaDelimitedList`, `List<AWS::EC2::...>`). The CDK's `BootstrapVersion` parameter is one:
`Type: AWS::SSM::Parameter::Value<String>`, `Default: /cdk-bootstrap/hnb659fds/version`.
`AWS::SSM::Parameter::Name` is the name itself, passed on as it is.

AWS's refusals, as users' logs quote them: a parameter that does not exist, "Unable to fetch
parameters [/cdk-bootstrap/hnb659fds/version] from parameter store for this account." (ValidationError
of CreateChangeSet; aws-cdk#17898, aws-deployment-framework#339); a SecureString, which these types
cannot carry, "Parameters [X] referenced by template have types not supported by CloudFormation."
(aws-cdk#15135); `Value<SecureString>`, "Template format error: Unrecognized parameter type:
SecureString" (aws-cdk#6786).
"""
from __future__ import annotations

from typing import Any

from .template import TemplateError

NAME_TYPE = "AWS::SSM::Parameter::Name"
_VALUE_PREFIX = "AWS::SSM::Parameter::Value<"
_BATCH = 10  # names per GetParameters call (the API's maximum)


def _inner_type(kind: str) -> str | None:
    """`T` of `AWS::SSM::Parameter::Value<T>` (None for any other type)."""
    if kind.startswith(_VALUE_PREFIX) and kind.endswith(">"):
        return kind[len(_VALUE_PREFIX):-1]
    return None


def _is_list(inner: str) -> bool:
    return inner == "CommaDelimitedList" or inner.startswith("List<")


def _check_inner(inner: str) -> None:
    if inner in ("String", "CommaDelimitedList") or inner.startswith(("AWS::", "List<")):
        return
    raise TemplateError(f"Template format error: Unrecognized parameter type: {inner}")


def resolve_ssm_parameters(parameter_specs: dict[str, Any], values: dict[str, Any], ssm_client: Any) -> dict[str, Any]:
    """The values of the template's SSM-typed parameters, read from Parameter Store: {template
    parameter: value} for each of them (`values` holds the SSM parameter names they were given)."""
    wanted: dict[str, str] = {}  # template parameter -> SSM parameter name
    resolved: dict[str, Any] = {}
    for name, spec in parameter_specs.items():
        kind = str((spec or {}).get("Type", "String"))
        if kind == NAME_TYPE:
            resolved[name] = values[name]
            continue
        inner = _inner_type(kind)
        if inner is None:
            continue
        _check_inner(inner)
        wanted[name] = str(values[name])
    if not wanted:
        return resolved
    if ssm_client is None:
        raise TemplateError(f"Parameters: [{', '.join(wanted)}] are read from Systems Manager Parameter Store, "
                            "which this deploy has no client for")
    found = _fetch(ssm_client, list(dict.fromkeys(wanted.values())))
    missing = [ssm_name for ssm_name in dict.fromkeys(wanted.values()) if ssm_name not in found]
    if missing:
        raise TemplateError(f"Unable to fetch parameters [{', '.join(missing)}] from parameter store for this account.")
    secure = [ssm_name for ssm_name in dict.fromkeys(wanted.values()) if found[ssm_name]["Type"] == "SecureString"]
    if secure:
        raise TemplateError(f"Parameters [{', '.join(secure)}] referenced by template have types not supported by "
                            "CloudFormation.")
    for name, ssm_name in wanted.items():
        value = found[ssm_name]["Value"]
        resolved[name] = value.split(",") if _is_list(_inner_type(str(parameter_specs[name]["Type"])) or "") \
            else value
    return resolved


def _fetch(ssm_client: Any, names: list[str]) -> dict[str, dict[str, Any]]:
    """The current version of each named SSM parameter that exists, by the name asked."""
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(names), _BATCH):
        batch = names[start:start + _BATCH]
        answer = ssm_client.get_parameters(Names=batch, WithDecryption=False)
        invalid = set(answer.get("InvalidParameters") or [])
        # Parameters come back in no promised order, each under the name as asked (by ARN: its own).
        by_name = {p["Name"]: p for p in answer.get("Parameters") or []}
        by_arn = {p.get("ARN"): p for p in answer.get("Parameters") or []}
        for asked in batch:
            if asked in invalid:
                continue
            parameter = by_name.get(asked.partition(":")[0] if not asked.startswith("arn:") else "") \
                or by_arn.get(asked)
            if parameter is not None:
                found[asked] = parameter
    return found
