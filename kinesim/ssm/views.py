"""A parameter version as each operation shows it: `Parameter` (GetParameter*, by path),
`ParameterMetadata` (DescribeParameters), `ParameterHistory` (GetParameterHistory).

A SecureString's value is shown as KMS shows a ciphertext unless the call asks `WithDecryption`:
base64 of a KMS ciphertext blob (version 1 blobs begin with the bytes 01 02 02 00 78, which is the
`AQICAHg...` every SecureString read without decryption starts with). kinesim encrypts nothing:
the blob is made once per version, so repeated reads give the same text, as AWS's do.
"""
from __future__ import annotations

import base64
import os
from typing import Any

DEFAULT_KEY = "alias/aws/ssm"  # the AWS managed key Parameter Store uses when none is named
_BLOB_HEADER = b"\x01\x02\x02\x00\x78"


def ciphertext(value: str) -> str:
    return base64.b64encode(_BLOB_HEADER + os.urandom(150 + len(value.encode()))).decode()


def shown_value(version: dict[str, Any], decrypt: bool) -> str:
    if version["Type"] == "SecureString" and not decrypt:
        return version["Ciphertext"]
    return version["Value"]


def parameter(service: Any, name: str, version: dict[str, Any], decrypt: bool,
              selector: str | None = None) -> dict[str, Any]:
    """The `Parameter` shape: what GetParameter answers (LocalStack's recordings of AWS:
    ARN, DataType, LastModifiedDate, Name, Type, Value, Version; Selector when one was asked)."""
    out = {"Name": name, "Type": version["Type"], "Value": shown_value(version, decrypt),
           "Version": version["Version"], "LastModifiedDate": version["LastModifiedDate"],
           "ARN": service.arn(name), "DataType": version["DataType"]}
    if selector is not None:
        out["Selector"] = f":{selector}"
    return out


def _common(service: Any, name: str, version: dict[str, Any]) -> dict[str, Any]:
    out = {"Name": name, "Type": version["Type"], "LastModifiedDate": version["LastModifiedDate"],
           "LastModifiedUser": version["LastModifiedUser"], "Version": version["Version"],
           "Tier": version["Tier"], "Policies": [], "DataType": version["DataType"]}
    for member in ("KeyId", "Description", "AllowedPattern"):
        if version.get(member) is not None:
            out[member] = version[member]
    return out


def metadata(service: Any, name: str, version: dict[str, Any]) -> dict[str, Any]:
    return {"ARN": service.arn(name), **_common(service, name, version)}


def history(service: Any, name: str, version: dict[str, Any], decrypt: bool) -> dict[str, Any]:
    return {**_common(service, name, version), "Value": shown_value(version, decrypt),
            "Labels": list(version.get("Labels", []))}
