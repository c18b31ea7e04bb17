"""The SAM transform (`Transform: AWS::Serverless-2016-10-31`), applied with aws-sam-translator.

The translator is the one CloudFormation runs, so `AWS::Serverless::Function` with its `Events`
becomes exactly the `AWS::Lambda::Function`, `AWS::IAM::Role` and
`AWS::Lambda::EventSourceMapping` resources AWS would create. Two things differ from a deploy to
AWS, because nothing here leaves the machine:
- managed policy names are looked up in the map the translator ships, never in IAM;
- a local `CodeUri` directory (what `sam build`/`sam package` would upload; built first, see
  build.py), or a layer's local `ContentUri`, is swapped for an `s3://` placeholder the
  translator accepts, and swapped back afterwards into the function's `Code` (the layer's
  `Content`), as a local path the Lambda handlers zip.
"""
from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any

import boto3
from samtranslator.internal.managed_policies import get_bundled_managed_policy_map
from samtranslator.model.exceptions import InvalidDocumentException
from samtranslator.parser.parser import Parser
from samtranslator.translator.translator import Translator

from .build import built
from .intrinsics import partition_of
from .lambda_resources import package
from .template import DeployError, TemplateError

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
    # sam build's step, before the transform as on AWS (sam deploy uploads built packages): the
    # version hash below and the upload then see the built package.
    template = built(template, template_dir, parameters, region)
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


# The local path properties: a function's code (also in Globals), a layer's content.
_LOCAL_PATHS = {"AWS::Serverless::Function": "CodeUri", "AWS::Serverless::LayerVersion": "ContentUri"}


def _placehold_local_code(template: dict[str, Any], template_dir: Path) -> dict[str, str]:
    """Swap each local `CodeUri` (in functions and in Globals) and `ContentUri` (in layers) for
    `s3://PLACEHOLDER/<n>-<hash of the package>`; returns placeholder key -> absolute local path.
    The hash stands for the S3 key `sam package` uploads to (the package's MD5): SAM names an
    AutoPublishAlias version, and a layer version, by a hash of that location, so changed code
    must change it for a redeploy to publish a new version."""
    places: list[tuple[dict[str, Any], str]] = [
        (r.get("Properties") or {}, _LOCAL_PATHS[r.get("Type")]) for r in template["Resources"].values()
        if isinstance(r, dict) and r.get("Type") in _LOCAL_PATHS]
    places.append((((template.get("Globals") or {}).get("Function")) or {}, "CodeUri"))
    local: dict[str, str] = {}
    for properties, prop in places:
        uri = properties.get(prop)
        if isinstance(uri, str) and not uri.startswith("s3://"):
            path = (template_dir / uri).resolve()
            key = f"code-{len(local)}-{_package_hash(path)}"
            local[key] = str(path)
            properties[prop] = f"s3://{PLACEHOLDER_BUCKET}/{key}"
    return local


def _package_hash(path: Path) -> str:
    try:
        return hashlib.sha256(package(path)).hexdigest()[:16]
    except DeployError:
        return "missing"  # reported where the package is made


def _restore_local_code(template: dict[str, Any], local_code: dict[str, str]) -> None:
    for resource in template["Resources"].values():
        prop = {"AWS::Lambda::Function": "Code", "AWS::Lambda::LayerVersion": "Content"}.get(resource.get("Type"))
        code = (resource.get("Properties") or {}).get(prop) if prop else None
        if isinstance(code, dict) and code.get("S3Bucket") == PLACEHOLDER_BUCKET:
            resource["Properties"][prop] = local_code[code["S3Key"]]
