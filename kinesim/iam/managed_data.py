"""AWS's managed policies (AWSLambdaBasicExecutionRole, AmazonS3FullAccess, ...), as AWS publishes
them: every one, since a template or tutorial may attach any.

`aws_managed_policies.json.gz` holds each one's path, default version, dates and document, taken
from the copy of AWS's managed policies moto ships as data (moto/iam/aws_managed_policies.py,
made by its `make aws_managed_policies` from IAM's ListPolicies/GetPolicyVersion); moto is not
imported. They belong to no account: their ARNs are `arn:aws:iam::aws:policy<path><name>`.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import string
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

_ID_CHARS = string.ascii_uppercase + string.digits


@cache
def _data() -> dict[str, dict[str, Any]]:
    return json.loads(gzip.decompress(Path(__file__).with_name("aws_managed_policies.json.gz").read_bytes()))


def _policy_id(name: str) -> str:
    # the same id on every server and after every restart, as an AWS policy's is
    digest = hashlib.sha256(name.encode()).digest()
    return "ANPA" + "".join(_ID_CHARS[b % len(_ID_CHARS)] for b in digest[:17])


def _date(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def _record(partition: str, name: str, raw: dict[str, Any]) -> dict[str, Any]:
    version = raw["DefaultVersionId"]
    return {"PolicyName": name, "PolicyId": _policy_id(name), "Path": raw["Path"],
            "Arn": f"arn:{partition}:iam::aws:policy{raw['Path']}{name}",
            "DefaultVersionId": version, "CreateDate": _date(raw["CreateDate"]),
            "UpdateDate": _date(raw["UpdateDate"]), "Tags": [], "AwsManaged": True,
            "Versions": [{"VersionId": version, "Document": json.dumps(raw["Document"], indent=4),
                          "CreateDate": _date(raw["UpdateDate"])}]}


@cache
def _records(partition: str) -> dict[str, dict[str, Any]]:
    records = (_record(partition, name, raw) for name, raw in _data().items())
    return {record["Arn"]: record for record in records}


def aws_policy(partition: str, arn: str) -> dict[str, Any] | None:
    """The AWS managed policy `arn` names, as a policy record (see policies.py), or None. The
    records are shared: nobody changes an AWS managed policy."""
    return _records(partition).get(arn)


def aws_policies(partition: str) -> list[dict[str, Any]]:
    return list(_records(partition).values())
