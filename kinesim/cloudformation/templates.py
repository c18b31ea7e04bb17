"""A request's template and what it declares: the body (TemplateBody, or TemplateURL read from
kinesim's own S3 store), its parameters (with UsePreviousValue and NoEcho), the capabilities it
needs, and the summaries GetTemplateSummary and ValidateTemplate give of it."""
from __future__ import annotations

import json
from typing import Any, Callable

from kinesim.deploy.intrinsics import Resolver, pseudo_parameters
from kinesim.deploy.plan import creation_order
from kinesim.deploy.sam import transforms
from kinesim.deploy.template import TemplateError, check_resources, parse_document
from kinesim.deploy.template_quotas import check_quotas
from kinesim.deploy.template_reader import NotWellFormed
from kinesim.deploy.template_url import s3_location as _s3_location
from kinesim.protocol.errors import AwsError

# The largest TemplateBody AWS takes (51,200 bytes) and TemplateURL object (1 MB).
MAX_BODY_BYTES = 51_200
MAX_URL_BYTES = 1_000_000


def invalid(message: str) -> AwsError:
    return AwsError("ValidationError", message)


def body_of(params: dict[str, Any], read_object: Callable[[str, str], bytes], previous: str | None = None) -> str:
    """The template's text: TemplateBody, the object TemplateURL names, or (UsePreviousTemplate) the
    stack's current one."""
    if params.get("UsePreviousTemplate"):
        if previous is None:
            raise invalid("UsePreviousTemplate can only be used with an existing stack")
        return previous
    body, url = params.get("TemplateBody"), params.get("TemplateURL")
    if body is not None and url is not None:
        raise invalid("Specify exactly one of TemplateBody or TemplateUrl.")
    if body is not None:
        if len(body.encode()) > MAX_BODY_BYTES:
            raise invalid(f"1 validation error detected: Value '{body[:40]}...' at 'templateBody' failed to satisfy "
                          f"constraint: Member must have length less than or equal to {MAX_BODY_BYTES}")
        return body
    if url is None:
        raise invalid("Either Template URL or Template Body must be specified.")
    bucket, key = s3_location(url)
    try:
        data = read_object(bucket, key)
    except AwsError as err:
        # S3's own message, as AWS relays it ("S3 error: The specified key does not exist.").
        raise invalid(f"S3 error: {err.message or err.code}") from None
    if len(data) > MAX_URL_BYTES:
        raise invalid(f"Template may not exceed {MAX_URL_BYTES} bytes in size.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise invalid("Template format error: unsupported structure.") from None


def check_processed_size(processed: dict[str, Any], params: dict[str, Any]) -> None:
    """A transform's output held to the size quota of the way the template came: "The maximum size
    for a processed stack template is 51,200 bytes when passed directly into a CreateStack,
    UpdateStack, or ValidateTemplate request, or 1 MB when passed as an S3 object" ("Troubleshoot the
    processed template", AWS CloudFormation User Guide). Measured as compact JSON, the processed
    template's form (GetTemplate's Processed stage)."""
    limit = MAX_BODY_BYTES if params.get("TemplateBody") is not None else MAX_URL_BYTES
    if len(json.dumps(processed, separators=(",", ":")).encode()) > limit:
        raise invalid(f"Template may not exceed {limit} bytes in size.")


def s3_location(url: str) -> tuple[str, str]:
    """The bucket and key of a TemplateURL (kinesim/deploy/template_url.py), or AWS's ValidationError."""
    try:
        return _s3_location(url)
    except TemplateError as err:
        raise invalid(str(err)) from None


def parse(text: str) -> dict[str, Any]:
    """The template as a dict; AWS's "Template format error" for what is not one, or for what passes
    one of AWS's quotas (checked before any work in proportion to the template)."""
    try:
        try:
            template = parse_document(text, "the template")
        except NotWellFormed as err:  # AWS's words and place, where they can be told
            raise TemplateError(err.aws_message) from None
        if not isinstance(template, dict):
            raise TemplateError("Template format error: unsupported structure.")
        check_quotas(template)
        if not any(t == "AWS::Include" or (isinstance(t, dict) and t.get("Name") == "AWS::Include")
                   for t in transforms(template)):
            check_resources(template)
            check_structure(template)
    except TemplateError as err:
        raise invalid(str(err)) from None
    return template


def stored(text: str) -> dict[str, Any]:
    """A template a stack already holds, read without the checks of a new one (a stack made by an
    earlier kinesim is still described, aliases and all)."""
    try:
        template = parse_document(text, "the template", aliases=True)
    except TemplateError:
        return {}
    return template if isinstance(template, dict) else {}


def check_cycles(template: dict[str, Any]) -> None:
    """AWS's "Circular dependency between resources: [A, B]" for a template whose resources depend
    on each other in a circle (Ref, Fn::GetAtt, Fn::Sub, DependsOn), as ValidateTemplate finds it:
    without parameter values, so both branches of every Fn::If count. A template with transforms is
    checked once they have run (CreateStack's plan)."""
    resources = template.get("Resources")
    if transforms(template) or not isinstance(resources, dict):
        return
    resolver = Resolver(template, {name: None for name in template.get("Parameters") or {}},
                        pseudo_parameters("us-east-1", "000000000000", "validate", "validate"))
    dependencies: dict[str, list[str]] = {}
    for lid, resource in resources.items():
        resource = resource if isinstance(resource, dict) else {}
        found = {name for name, _ in resolver.references(resource.get("Properties"), every_branch=True)}
        depends_on = resource.get("DependsOn") or []
        found.update(d for d in ([depends_on] if isinstance(depends_on, str) else depends_on) if isinstance(d, str))
        dependencies[lid] = sorted(found)
    try:
        creation_order(dependencies, list(resources))
    except TemplateError as err:
        raise invalid(str(err)) from None


# The attributes a resource may have (other keys: "Invalid template resource property").
_RESOURCE_KEYS = frozenset(("Type", "Properties", "DependsOn", "CreationPolicy", "DeletionPolicy", "Metadata",
                            "UpdatePolicy", "UpdateReplacePolicy", "Condition"))


def check_structure(template: dict[str, Any]) -> None:
    """The sections' shapes, as AWS checks them before anything else (LocalStack's recordings of
    AWS, test_validations.snapshot.json). Resource attributes are checked only without transforms:
    a macro (SAM's Connectors...) may take others."""
    for lid, resource in template["Resources"].items():
        if not isinstance(resource, dict) or "Type" not in resource:
            raise TemplateError(f"Template format error: [/Resources/{lid}] Every Resources object must contain a "
                                "Type member.")
        unknown = [key for key in resource if key not in _RESOURCE_KEYS]
        if unknown and not transforms(template):
            raise TemplateError(f"Invalid template resource property '{unknown[0]}'")
    outputs = template.get("Outputs") or {}
    for key, output in (outputs.items() if isinstance(outputs, dict) else ()):
        if not isinstance(output, dict) or "Value" not in output:
            raise TemplateError("Template format error: Every Outputs member must contain a Value object")
        if output["Value"] is None:
            raise TemplateError(f"[/Outputs/{key}/Value] 'null' values are not allowed in templates")


def parameter_overrides(declared: dict[str, Any], given: list[dict[str, Any]],
                        previous: dict[str, Any] | None) -> dict[str, str]:
    """The values to deploy with: each given value; UsePreviousValue's from the stack (as
    `aws cloudformation deploy` and `sam deploy` send it for every parameter not overridden)."""
    out: dict[str, str] = {}
    unknown = [item["ParameterKey"] for item in given if item.get("ParameterKey") and item["ParameterKey"] not in declared]
    if unknown:
        raise invalid(f"Parameters: [{', '.join(unknown)}] do not exist in the template")
    for item in given:
        key = item.get("ParameterKey")
        if not key:
            continue
        if item.get("UsePreviousValue"):
            if previous is None or key not in previous:
                raise invalid(f"Invalid input for parameter key {key}. Cannot specify usePreviousValue as true for "
                              "a parameter key not in the previous template")
            value = previous[key]
            out[key] = ",".join(value) if isinstance(value, list) else str(value)
        elif "ParameterValue" in item:
            out[key] = item["ParameterValue"]
    return out


def shown_parameters(declared: dict[str, Any], values: dict[str, Any], given: dict[str, str]) -> list[dict[str, Any]]:
    """A stack's Parameters as DescribeStacks shows them: NoEcho ones masked, SSM-typed ones as the
    parameter name given, with the value read as ResolvedValue."""
    out = []
    for key, spec in declared.items():
        if key not in values:
            continue
        value = values[key]
        text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        entry: dict[str, Any] = {"ParameterKey": key, "ParameterValue": text}
        kind = str((spec or {}).get("Type", "String"))
        if kind.startswith("AWS::SSM::Parameter::Value"):
            entry["ParameterValue"] = given.get(key, str((spec or {}).get("Default", "")))
            entry["ResolvedValue"] = text
        if str((spec or {}).get("NoEcho", "false")).lower() == "true":
            entry["ParameterValue"] = "****"
        out.append(entry)
    return out


# Capabilities: IAM resources need CAPABILITY_IAM, named ones CAPABILITY_NAMED_IAM; a template
# with transforms created or updated directly (not through a change set) CAPABILITY_AUTO_EXPAND.
_IAM_NAMES = {"AWS::IAM::Role": "RoleName", "AWS::IAM::ManagedPolicy": "ManagedPolicyName",
              "AWS::IAM::User": "UserName", "AWS::IAM::Group": "GroupName",
              "AWS::IAM::InstanceProfile": "InstanceProfileName", "AWS::IAM::Policy": None,
              "AWS::IAM::AccessKey": None, "AWS::IAM::UserToGroupAddition": None}


def required_capabilities(template: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The capabilities the (processed) template needs, and the resources that need them."""
    needed: list[str] = []
    why: list[str] = []
    for lid, resource in (template.get("Resources") or {}).items():
        if not isinstance(resource, dict) or resource.get("Type") not in _IAM_NAMES:
            continue
        why.append(lid)
        name_property = _IAM_NAMES[resource["Type"]]
        named = name_property is not None and name_property in (resource.get("Properties") or {})
        capability = "CAPABILITY_NAMED_IAM" if named else "CAPABILITY_IAM"
        if capability not in needed:
            needed.append(capability)
    if "CAPABILITY_NAMED_IAM" in needed:
        needed = ["CAPABILITY_NAMED_IAM"]
    return needed, why


def check_capabilities(template: dict[str, Any], granted: list[str]) -> None:
    needed, _ = required_capabilities(template)
    if needed == ["CAPABILITY_IAM"] and "CAPABILITY_NAMED_IAM" in granted:
        return
    missing = [c for c in needed if c not in granted]
    if missing:
        raise AwsError("InsufficientCapabilitiesException", f"Requires capabilities : [{', '.join(missing)}]")


def declared_parameters(template: dict[str, Any]) -> list[dict[str, Any]]:
    """ParameterDeclaration entries (GetTemplateSummary) in the template's order."""
    out = []
    for key, spec in (template.get("Parameters") or {}).items():
        spec = spec if isinstance(spec, dict) else {}
        entry: dict[str, Any] = {"ParameterKey": key, "ParameterType": str(spec.get("Type", "String")),
                                 "NoEcho": str(spec.get("NoEcho", "false")).lower() == "true",
                                 "ParameterConstraints": {}}
        if "Default" in spec:
            default = spec["Default"]
            entry["DefaultValue"] = ",".join(map(str, default)) if isinstance(default, list) else str(default)
        if "Description" in spec:
            entry["Description"] = str(spec["Description"])
        if "AllowedValues" in spec:
            entry["ParameterConstraints"] = {"AllowedValues": [str(v) for v in spec["AllowedValues"]]}
        out.append(entry)
    return out


# The properties that name a resource of each type (its schema's primaryIdentifier, where the
# template can set it): GetTemplateSummary's ResourceIdentifiers, for resource import.
_IDENTIFIERS = {"AWS::S3::Bucket": "BucketName", "AWS::Kinesis::Stream": "Name",
                "AWS::Lambda::Function": "FunctionName", "AWS::SSM::Parameter": "Name",
                "AWS::Logs::LogGroup": "LogGroupName", "AWS::IAM::Role": "RoleName",
                "AWS::KinesisFirehose::DeliveryStream": "DeliveryStreamName",
                "AWS::ECR::Repository": "RepositoryName"}


def _identifier_summaries(resources: dict[str, Any]) -> list[dict[str, Any]]:
    by_type: dict[str, list[str]] = {}
    for lid, resource in resources.items():
        if isinstance(resource, dict) and isinstance(resource.get("Type"), str):
            by_type.setdefault(resource["Type"], []).append(lid)
    out = []
    for type_name, lids in by_type.items():
        entry: dict[str, Any] = {"ResourceType": type_name, "LogicalResourceIds": lids}
        if type_name in _IDENTIFIERS:
            entry["ResourceIdentifiers"] = [_IDENTIFIERS[type_name]]
        out.append(entry)
    return out


def summary(template: dict[str, Any], processed: dict[str, Any] | None = None) -> dict[str, Any]:
    """GetTemplateSummary's answer for a template (processed: after its transforms, when known).
    AWS leaves out DeclaredTransforms when there are none, but always gives Parameters."""
    needed, why = required_capabilities(processed or template)
    resources = (processed or template).get("Resources") or {}
    out: dict[str, Any] = {
        "Parameters": declared_parameters(template),
        "ResourceTypes": sorted({r["Type"] for r in resources.values()
                                 if isinstance(r, dict) and isinstance(r.get("Type"), str)}),
        "Version": str(template.get("AWSTemplateFormatVersion", "2010-09-09")),
        "ResourceIdentifierSummaries": _identifier_summaries(resources),
    }
    declared_transforms = [t for t in transforms(template) if isinstance(t, str)]
    if declared_transforms:
        out["DeclaredTransforms"] = declared_transforms
    if "Description" in template:
        out["Description"] = str(template["Description"])
    if "Metadata" in template:
        out["Metadata"] = json.dumps(template["Metadata"])
    if needed:
        out["Capabilities"] = needed
        out["CapabilitiesReason"] = f"The following resource(s) require capabilities: [{', '.join(why)}]"
    return out
