"""AWS's quotas on what one template declares ("Understand CloudFormation quotas", AWS CloudFormation
User Guide; the same numbers as cfn-lint's `cfnlint.helpers.LIMITS` and its rules E2010, E3010,
E6010, E7010, E7012): 500 resources, 200 parameters, 200 outputs, 200 mappings of at most 200
attributes, names of at most 255 characters, a description of at most 1,024 bytes.

They are checked on the template as sent, before anything that costs in proportion to it (the
transforms, the plan, a handler per resource), and again on the processed template: CloudFormation
uses the template its transforms return ("Troubleshoot the processed template" holds it to the size
quotas too), so 251 SAM functions, each given a role, are 502 resources and refused.

The messages are AWS's where its answers are on record (quoted in issues of the tools that met
them): resources "Template format error: Number of resources, 202, is greater than maximum
allowed, 200" (serverless/serverless#2387, #6803, clebert/aws-simple#98, from before the quota
became 500), parameters "Template format error: Parameter count 86 is greater than max allowed 60"
(remind101/empire#861), outputs "Template format error: Outputs count 78 is greater than max
allowed 60" (serverless/serverless#2853, dougmoscrop/serverless-plugin-split-stacks#43). Mappings,
names and the description have no answer on record: theirs are kinesim's, in the same form.
"""
from __future__ import annotations

from typing import Any

from .errors import TemplateError

MAX_RESOURCES = 500
MAX_PARAMETERS = 200
MAX_OUTPUTS = 200
MAX_MAPPINGS = 200
MAX_MAPPING_ATTRIBUTES = 200
MAX_NAME = 255
MAX_DESCRIPTION_BYTES = 1024


def _section(template: dict[str, Any], name: str) -> dict[str, Any]:
    value = template.get(name)
    return value if isinstance(value, dict) else {}  # another shape is refused by the structure's checks


def check_quotas(template: dict[str, Any]) -> None:
    """TemplateError with AWS's message for the first quota the template passes."""
    resources = _section(template, "Resources")
    if len(resources) > MAX_RESOURCES:
        raise TemplateError(f"Template format error: Number of resources, {len(resources)}, is greater than "
                            f"maximum allowed, {MAX_RESOURCES}")
    # The other sections' counts share one form of message ("Parameter count 201 is greater than max
    # allowed 200", "Outputs count ..."; the sources are in this module's docstring).
    parameters, outputs, mappings = (_section(template, name) for name in ("Parameters", "Outputs", "Mappings"))
    for word, section, limit in (("Parameter", parameters, MAX_PARAMETERS), ("Outputs", outputs, MAX_OUTPUTS),
                                 ("Mappings", mappings, MAX_MAPPINGS)):
        if len(section) > limit:
            raise TemplateError(f"Template format error: {word} count {len(section)} is greater than max "
                                f"allowed {limit}")
    for kind, section in (("Resource", resources), ("Parameter", parameters), ("Output", outputs),
                          ("Mapping", mappings)):
        for name in section:
            _check_name(kind, name)
    for name, mapping in mappings.items():
        _check_mapping(name, mapping)
    description = template.get("Description")
    if isinstance(description, str) and len(description.encode()) > MAX_DESCRIPTION_BYTES:
        raise TemplateError(f"Template format error: Template description is longer than {MAX_DESCRIPTION_BYTES} "
                            "bytes.")


def _check_name(kind: str, name: str) -> None:
    if len(name) > MAX_NAME:
        raise TemplateError(f"Template format error: {kind} name {name} is longer than {MAX_NAME} characters.")


def _check_mapping(name: str, mapping: Any) -> None:
    """A mapping's attributes: its top-level keys, and each one's second-level keys (cfn-lint's
    mapping schema bounds both at 200, and their names at 255 characters)."""
    if not isinstance(mapping, dict):
        return
    levels = [mapping] + [value for value in mapping.values() if isinstance(value, dict)]
    for level in levels:
        if len(level) > MAX_MAPPING_ATTRIBUTES:
            raise TemplateError(f"Template format error: Mapping attributes count {len(level)} in mapping {name} "
                                f"is greater than max allowed {MAX_MAPPING_ATTRIBUTES}")
        for key in level:
            if len(key) > MAX_NAME:
                raise TemplateError(f"Template format error: Mapping attribute name {key} in mapping {name} is "
                                    f"longer than {MAX_NAME} characters.")
