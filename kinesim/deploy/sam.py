"""The SAM transform (`Transform: AWS::Serverless-2016-10-31`), applied with aws-sam-translator.

The translator is the one CloudFormation runs, so `AWS::Serverless::Function` with its `Events`
becomes exactly the `AWS::Lambda::Function`, `AWS::IAM::Role` and
`AWS::Lambda::EventSourceMapping` resources AWS would create. Two things differ from a deploy to
AWS, because nothing here leaves the machine:
- managed policy names are looked up in the map the translator ships, never in IAM;
- a local `CodeUri` directory (what `sam build`/`sam package` would upload) is swapped for an
  `s3://` placeholder the translator accepts, and swapped back afterwards into the function's
  `Code`, as a local path that the Lambda handler zips.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import boto3
from samtranslator.internal.managed_policies import get_bundled_managed_policy_map
from samtranslator.model.exceptions import InvalidDocumentException
from samtranslator.parser.parser import Parser
from samtranslator.translator.translator import Translator

from .intrinsics import partition_of
from .template import TemplateError

SAM_TRANSFORM = "AWS::Serverless-2016-10-31"
PLACEHOLDER_BUCKET = "kinesim-local-code"


class BundledManagedPolicyLoader:
    """What samtranslator's ManagedPolicyLoader offers (`load()`: policy name -> ARN), answered
    from the map bundled with the translator instead of IAM's ListPolicies."""

    def __init__(self, partition: str = "aws"):
        self.partition = partition

    def load(self) -> dict[str, str]:
        return dict(get_bundled_managed_policy_map(self.partition) or {})


def transforms(template: dict[str, Any]) -> list[str]:
    declared = template.get("Transform") or []
    return [declared] if isinstance(declared, str) else list(declared)


def is_sam(template: dict[str, Any]) -> bool:
    return SAM_TRANSFORM in transforms(template)


def translate(template: dict[str, Any], template_dir: Path, region: str,
              parameters: dict[str, Any]) -> dict[str, Any]:
    """The CloudFormation template that `template` stands for: itself when it declares no SAM
    transform, else the translator's output with local code paths made absolute."""
    other = [t for t in transforms(template) if t != SAM_TRANSFORM]
    if other:
        raise TemplateError(f"Transform {', '.join(map(str, other))} is not supported by kinesim deploy "
                            f"(only {SAM_TRANSFORM})")
    if not is_sam(template):
        return template
    template = copy.deepcopy(template)
    local_code = _placehold_local_code(template, template_dir)
    translator = Translator(None, Parser(), boto_session=boto3.Session(region_name=region))
    try:
        out = translator.translate(template, parameter_values=dict(parameters),
                                   get_managed_policy_map=BundledManagedPolicyLoader(partition_of(region)).load)
    except InvalidDocumentException as err:
        raise TemplateError("SAM transform failed: " + "; ".join(c.message for c in err.causes)) from None
    _restore_local_code(out, local_code)
    return out


def _placehold_local_code(template: dict[str, Any], template_dir: Path) -> dict[str, str]:
    """Swap each local `CodeUri` (in functions and in Globals) for `s3://PLACEHOLDER/<n>`;
    returns placeholder key -> absolute local path."""
    places: list[dict[str, Any]] = [r.get("Properties") or {} for r in template["Resources"].values()
                                    if isinstance(r, dict) and r.get("Type") == "AWS::Serverless::Function"]
    places.append(((template.get("Globals") or {}).get("Function")) or {})
    local: dict[str, str] = {}
    for properties in places:
        uri = properties.get("CodeUri")
        if isinstance(uri, str) and not uri.startswith("s3://"):
            key = f"code-{len(local)}"
            local[key] = str((template_dir / uri).resolve())
            properties["CodeUri"] = f"s3://{PLACEHOLDER_BUCKET}/{key}"
    return local


def _restore_local_code(template: dict[str, Any], local_code: dict[str, str]) -> None:
    for resource in template["Resources"].values():
        code = (resource.get("Properties") or {}).get("Code")
        if resource.get("Type") == "AWS::Lambda::Function" and isinstance(code, dict) \
                and code.get("S3Bucket") == PLACEHOLDER_BUCKET:
            resource["Properties"]["Code"] = local_code[code["S3Key"]]
