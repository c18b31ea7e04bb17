"""`kinesim deploy`'s package step, as `sam package` / `aws cloudformation package` do it: each
local code path of the template (a function's CodeUri or Code, a layer's ContentUri or Content,
in Globals too) zipped, uploaded to an artifacts bucket on the server, and replaced by its S3
location. The server then deploys the template as AWS would: it reads code from S3, never from
the client's disk.

Objects are named by the zip's sha256, so unchanged code keeps its key (and the function is not
updated) and changed code gets a new one (a new AutoPublishAlias version, as with `sam deploy`).

A nested stack's template given as a local file (AWS::CloudFormation::Stack's TemplateURL,
AWS::Serverless::Application's Location, as `aws cloudformation package` takes them) is packaged
the same way, recursively, uploaded as `<sha256>.template` and named by its URL.
"""
from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from .lambda_resources import package as zip_package
from .resources import error_code
from .template import TemplateError, inline_includes, load_template

# Where each type keeps its code, and whether the packaged form is an S3 URI (SAM) or an
# S3Bucket/S3Key object (CloudFormation).
_CODE = {"AWS::Serverless::Function": ("CodeUri", "uri"), "AWS::Serverless::LayerVersion": ("ContentUri", "uri"),
         "AWS::Lambda::Function": ("Code", "object"), "AWS::Lambda::LayerVersion": ("Content", "object")}
# Where a nested stack names its template.
_NESTED = {"AWS::CloudFormation::Stack": "TemplateURL", "AWS::Serverless::Application": "Location"}


def artifacts_bucket(account_id: str, region: str) -> str:
    return f"kinesim-deploy-artifacts-{account_id}-{region}"


def package_template(template: dict[str, Any], template_dir: Path, s3: Any, bucket: str,
                     endpoint_url: str | None = None, _nesting: tuple[Path, ...] = ()) -> dict[str, Any]:
    """`template` with its local code uploaded to `bucket` and named by S3 location, and its local
    nested templates, packaged, uploaded and named by URL: `<endpoint_url>/<bucket>/<key>` (the
    server's own, path-style), else S3's path-style URL, which kinesim reads from its own store too."""
    template = copy.deepcopy(template)
    uploader = _Uploader(s3, bucket, template_dir)
    for resource in (template.get("Resources") or {}).values():
        nested = _NESTED.get(resource.get("Type")) if isinstance(resource, dict) else None
        properties = resource.get("Properties") if nested else None
        if isinstance(properties, dict) and _is_local_template(properties.get(nested)):
            path = (template_dir / properties[nested]).resolve()
            if path in _nesting:
                raise TemplateError(f"Template format error: {path} nests itself (through {_nesting[-1].name})")
            child = load_template(path)
            child = inline_includes(child, path.parent,
                                    lambda b, k: s3.get_object(Bucket=b, Key=k)["Body"].read())
            child = package_template(child, path.parent, s3, bucket, endpoint_url, (*_nesting, path))
            body = json.dumps(child, indent=1).encode()
            key = hashlib.sha256(body).hexdigest() + ".template"
            uploader.upload(key, body)
            base = endpoint_url.rstrip("/") if endpoint_url else "https://s3.amazonaws.com"
            properties[nested] = f"{base}/{bucket}/{key}"
        if not isinstance(resource, dict) or resource.get("Type") not in _CODE:
            continue
        prop, form = _CODE[resource["Type"]]
        properties = resource.get("Properties")
        if isinstance(properties, dict) and _is_local(properties.get(prop)):
            properties[prop] = uploader.location(properties[prop], form)
    globals_function = (template.get("Globals") or {}).get("Function")
    if isinstance(globals_function, dict) and _is_local(globals_function.get("CodeUri")):
        globals_function["CodeUri"] = uploader.location(globals_function["CodeUri"], "uri")
    return template


def _is_local(value: Any) -> bool:
    return isinstance(value, str) and not value.startswith("s3://")


def _is_local_template(value: Any) -> bool:
    return isinstance(value, str) and not value.startswith(("s3://", "http://", "https://"))


class _Uploader:
    def __init__(self, s3: Any, bucket: str, template_dir: Path):
        self.s3 = s3
        self.bucket = bucket
        self.template_dir = template_dir
        self.bucket_ready = False

    def location(self, path: str, form: str) -> Any:
        archive = zip_package(self.template_dir / path)
        key = hashlib.sha256(archive).hexdigest() + ".zip"
        self.upload(key, archive)
        return f"s3://{self.bucket}/{key}" if form == "uri" else {"S3Bucket": self.bucket, "S3Key": key}

    def upload(self, key: str, archive: bytes) -> None:
        if not self.bucket_ready:
            try:
                self.s3.create_bucket(Bucket=self.bucket)
            except ClientError as err:
                if error_code(err) != "BucketAlreadyOwnedByYou":
                    raise
            self.bucket_ready = True
        try:
            self.s3.head_object(Bucket=self.bucket, Key=key)
            return  # the same code, uploaded before
        except ClientError as err:
            if error_code(err) not in ("404", "NoSuchKey", "NotFound"):
                raise
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=archive)
