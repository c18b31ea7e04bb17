"""Policy documents: checked as IAM checks them before storing, and answered as IAM answers them.

IAM keeps a document's text as the client sent it and answers it URL-encoded (botocore and the
AWS CLI decode it back into JSON for the caller). The checks are the grammar's outline — JSON, a
known Version, Statement entries with an Effect — and the size quotas; IAM's full grammar (which
actions and condition keys exist) is not checked, and nothing is evaluated.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import quote

from kinesim.protocol import user_json

from .errors import limit_exceeded, malformed_policy

VERSIONS = ("2008-10-17", "2012-10-17")
# Quotas in characters, whitespace not counted (AWS's IAM quotas page).
MANAGED_POLICY_SIZE = 6144
ROLE_INLINE_SIZE = 10240  # all of a role's inline policies together
USER_INLINE_SIZE = 2048
GROUP_INLINE_SIZE = 5120
TRUST_POLICY_SIZE = 2048


def checked(text: str, trust: bool = False) -> dict[str, Any]:
    """The parsed document, or AWS's MalformedPolicyDocument. A role's trust policy may have no
    statement (templates use `Statement: []` for a role nothing assumes yet); a permissions policy
    needs one (moto's validator, which follows IAM's answers)."""
    try:
        # user_json: json.loads recurses, and a document of nested brackets would be a 500.
        document = user_json.loads(text)
    except ValueError:
        raise malformed_policy("This policy contains invalid Json") from None
    if not isinstance(document, dict):
        raise malformed_policy("This policy contains invalid Json")
    version = document.get("Version")
    if version is not None and version not in VERSIONS:
        raise malformed_policy("The policy must contain a valid version string")
    statements = document.get("Statement")
    if isinstance(statements, dict):
        statements = [statements]
    if not isinstance(statements, list) or not (statements or trust):
        raise malformed_policy("Syntax errors in policy.")
    for statement in statements:
        if not isinstance(statement, dict) or statement.get("Effect") not in ("Allow", "Deny"):
            raise malformed_policy("Syntax errors in policy.")
        if not any(k in statement for k in ("Action", "NotAction")):
            raise malformed_policy("Policy statement must contain actions.")
    return document


def size(text: str) -> int:
    """A document's size as IAM counts it against its quotas: without whitespace."""
    return sum(1 for ch in text if not ch.isspace())


def check_quota(text: str, quota: int, name: str) -> None:
    if size(text) > quota:
        raise limit_exceeded(f"Cannot exceed quota for {name}: {quota}")


def answered(text: str) -> str:
    """A stored document as IAM's answers carry it (URL-encoded)."""
    return quote(text, safe="")
