"""The whole template checked before anything is created, every problem named at once.

CloudFormation validates a template and its resource types before it touches a resource; a
local deploy has more to check (what kinesim emulates, which runtimes its server runs), and a
user who fixes problems one deploy at a time loses time. So the check collects:
- resource types kinesim deploy has no handler for: for services kinesim does not emulate at all
  the message names the service (from the type's service part, read against the handler table
  at run time, so handlers added later count), else it names the type;
- Ref / Fn::GetAtt / DependsOn to resources that do not exist, or attributes not provided;
- function runtimes the server cannot run (the server's `/_kinesim/health` lists them);
- every property a handler does not support, and values it cannot convert: each resource's
  `desired()` is tried on its properties, with placeholders for what other resources will give.
"""
from __future__ import annotations

import fnmatch
from functools import cache
from typing import Any, Callable

from .custom_resources import check_type_name, is_custom
from .handlers import HANDLERS, handler_class
from .intrinsics import Resolver
from .resources import ResourceHandler, schema_attributes
from .template import DeployError, TemplateError
from .template_quotas import check_quotas

# What a server that does not list its runtimes runs (kinesim before Node.js support).
DEFAULT_RUNTIMES = ("python3.*",)
# CloudFormation service parts whose botocore name is not simply the part in lower case.
_BOTOCORE_NAMES = {"KinesisFirehose": "firehose", "ElasticLoadBalancingV2": "elbv2", "Cognito": "cognito-idp",
                   "ElasticLoadBalancing": "elb", "CertificateManager": "acm", "Pipes": "pipes"}


class Problems:
    """Problems found so far; `raise_any()` raises them as one error."""

    def __init__(self) -> None:
        self.found: list[DeployError] = []

    def add(self, err: DeployError) -> None:
        if str(err) not in map(str, self.found):
            self.found.append(err)

    def raise_any(self) -> None:
        if not self.found:
            return
        if len(self.found) == 1:
            raise self.found[0]
        kind = TemplateError if all(isinstance(p, TemplateError) for p in self.found) else DeployError
        raise kind(f"{len(self.found)} problems found before anything was created or changed:\n  "
                   + "\n  ".join(map(str, self.found)))


def check(template: dict[str, Any], resolver: Resolver, runtimes: list[str] | None = None,
          handler_for: Callable[[str], ResourceHandler] | None = None) -> dict[str, list[str]]:
    """Every problem the template has, raised at once; else each included resource's
    dependencies (Ref, Fn::GetAtt, Fn::Sub, DependsOn). `handler_for` enables the property check."""
    # AWS's quotas first, on the processed template (included snippets and SAM's resources count
    # too), and alone: what follows costs in proportion to the resources.
    check_quotas(template)
    problems = Problems()
    resources = template["Resources"]
    included = {lid for lid in resources if _resource(resources, lid) and resolver.included(lid)}
    dependencies: dict[str, list[str]] = {}
    troubled: set[str] = set()  # resources with a problem already: their properties are not tried
    for lid in resources:
        if lid not in included:
            continue
        before = len(problems.found)
        type_name = resources[lid]["Type"]
        if handler_class(type_name) is None:
            problems.add(DeployError(unsupported_type(lid, type_name)))
        elif is_custom(type_name) and check_type_name(type_name):
            problems.add(TemplateError(f"Template format error: resource {lid}: {check_type_name(type_name)}"))
        found: set[str] = set()
        for prop, value in (resources[lid].get("Properties") or {}).items():
            found |= _checked_references(resolver.references(value), resources, included,
                                         f"resource {lid}, property {prop}", problems)
        depends_on = resources[lid].get("DependsOn") or []
        for name in [depends_on] if isinstance(depends_on, str) else depends_on:
            if name not in included:
                problems.add(TemplateError(f"Template format error: resource {lid}, DependsOn: Unresolved resource "
                                           f"dependencies [{name}] in the Resources block of the template"))
            else:
                found.add(name)
        dependencies[lid] = sorted(found)
        if len(problems.found) > before:
            troubled.add(lid)
    for name, output in (template.get("Outputs") or {}).items():
        if output.get("Condition") is None or resolver.condition(output["Condition"]):
            _checked_references(resolver.references(output.get("Value")), resources, included, f"output {name}",
                                problems)
    for lid in sorted(included):
        if resources[lid]["Type"] == "AWS::Lambda::Function":
            _check_runtime(lid, resources[lid].get("Properties") or {}, resolver, runtimes, problems)
    if handler_for is not None:
        _check_properties(resources, included - troubled, dependencies, resolver, handler_for, problems)
    problems.raise_any()
    return dependencies


def _resource(resources: dict[str, Any], lid: str) -> bool:
    if not isinstance(resources[lid], dict) or "Type" not in resources[lid]:
        raise TemplateError(f"Template format error: [/Resources/{lid}] Every Resources object must contain a "
                            "Type member.")
    return True


def _checked_references(refs: Any, resources: dict[str, Any], included: set[str], where: str,
                        problems: Problems) -> set[str]:
    found = set()
    for name, attribute in refs:
        if name not in included:
            problems.add(TemplateError(f"Template format error: {where}: Unresolved resource dependencies [{name}] "
                                       "in the Resources block of the template"))
            continue
        type_name = resources[name]["Type"]
        if attribute is not None and type_name in HANDLERS:
            if attribute not in schema_attributes(type_name):
                problems.add(TemplateError(f"Template error: {where}: resource {name} does not support attribute "
                                           f"type {attribute} in Fn::GetAtt"))
            elif attribute not in HANDLERS[type_name].attributes:
                problems.add(DeployError(
                    f"{where}: attribute {attribute} of {type_name} ({name}) is not provided by kinesim deploy "
                    f"(provided: {', '.join(sorted(HANDLERS[type_name].attributes))})"))
        found.add(name)
    return found


def unsupported_type(lid: str, type_name: str) -> str:
    parts = type_name.split("::")
    service = parts[1] if len(parts) == 3 and parts[0] == "AWS" else None
    emulated = {t.split("::")[1] for t in HANDLERS}
    if service and service not in emulated:
        return (f"resource {lid}: kinesim does not emulate {service_title(service)}: {type_name} cannot be "
                f"deployed (kinesim deploy makes resources of {', '.join(sorted(emulated))}); remove it, or keep "
                "it out of the local stack with a Condition")
    same_service = sorted(t for t in HANDLERS if service and t.split("::")[1] == service)
    return (f"resource {lid}: type {type_name} is not supported by kinesim deploy"
            + (f" (of {service}: {', '.join(same_service)})" if same_service else ""))


@cache
def service_title(service: str) -> str:
    """`Amazon DynamoDB` for `DynamoDB`: the service's full name in botocore's model, offline."""
    from kinesim.protocol.models import UnknownModel, load_service_model

    try:
        metadata = load_service_model(_BOTOCORE_NAMES.get(service, service.lower())).get("metadata") or {}
    except UnknownModel:
        return f"AWS {service}"
    return str(metadata.get("serviceFullName") or f"AWS {service}")


def runs(runtime: str, runtimes: list[str] | None) -> bool:
    return any(fnmatch.fnmatchcase(runtime, pattern) for pattern in (runtimes or DEFAULT_RUNTIMES))


def _check_runtime(lid: str, properties: dict[str, Any], resolver: Resolver, runtimes: list[str] | None,
                   problems: Problems) -> None:
    code = properties.get("Code")
    if properties.get("PackageType") == "Image" or (isinstance(code, dict) and "ImageUri" in code):
        problems.add(DeployError(f"resource {lid}: container image functions (PackageType Image) cannot run on "
                                 "kinesim: package the function as a .zip (CodeUri) with a runtime it runs"))
        return
    if "Runtime" not in properties:
        return
    try:
        runtime = resolver.resolve(properties["Runtime"])
    except TemplateError:
        return  # refers to a resource: known only once it exists
    if isinstance(runtime, str) and not runs(runtime, runtimes):
        available = ", ".join(runtimes or DEFAULT_RUNTIMES)
        problems.add(DeployError(
            f"resource {lid}: Runtime {runtime} cannot run on this kinesim server (it runs {available}); "
            "kinesim runs handlers with the machine's own interpreters: port the handler to one of those runtimes "
            "to try it locally"))


def _check_properties(resources: dict[str, Any], included: set[str], dependencies: dict[str, list[str]],
                      resolver: Resolver, handler_for: Callable[[str], ResourceHandler], problems: Problems) -> None:
    """Try each handler's `desired()` on the resource's properties, what other resources give
    stood in for by placeholders. With placeholders a value check may fail where the real value
    would pass, so for resources that refer to others only unsupported properties are reported."""
    standin = Resolver(resolver.template, resolver.parameters, resolver.pseudo, resolver.imports)
    region, account = resolver.pseudo["AWS::Region"], resolver.pseudo["AWS::AccountId"]
    for lid in included:
        handler = handler_class(resources[lid]["Type"])
        service = resources[lid]["Type"].split("::")[1].lower()
        attributes = {a: (f"arn:{resolver.pseudo['AWS::Partition']}:{service}:{region}:{account}:{lid.lower()}"
                          if a.endswith("Arn") else lid.lower()) for a in handler.attributes}
        standin.known(lid, lid.lower(), attributes)
    for lid in sorted(included):
        type_name = resources[lid]["Type"]
        try:
            handler_for(type_name).desired(standin.resolve(resources[lid].get("Properties") or {}))
        except DeployError as err:
            if str(err).startswith("No export named"):
                problems.add(err)  # AWS's whole message: the export, not the resource, is what is missing
            elif not dependencies[lid] or "not supported" in str(err):
                problems.add(type(err)(f"resource {lid} ({type_name}): {err}"))
        except Exception:  # noqa: BLE001 - a placeholder the handler could not take: found when applied
            continue
