"""STS: who a caller is (GetCallerIdentity) and temporary credentials (AssumeRole,
GetSessionToken), which kinesim then accepts like the configured ones (`credentials.py`).

kinesim checks no permissions: any role may be assumed, in any account (the credentials issued
belong to the role's account: requests signed with them are in it, `kinesim/scopes.py`). A role IAM has is
assumed as AWS does it (its RoleId in AssumedRoleId, its MaxSessionDuration the longest session);
a role IAM lacks is assumed all the same, with an id derived from its ARN (AWS would refuse it with
AccessDenied; LocalStack and moto answer, and kinesim always has). A caller whose key STS did not
issue is the IAM user whose Active key it is (`principals`, given by the composition root), else
the account's root user. The caller's access key id comes from the request's signature, its account
from the request's scope (`api.py` sets `CALLER` and `ACCOUNT` for the duration of the call).
"""
from __future__ import annotations

import hashlib
import math
import re
import string
from contextvars import ContextVar
from typing import Any, Callable, Protocol

from kinesim.config import Settings
from kinesim.protocol import user_json
from kinesim.protocol.errors import AwsError
from kinesim.protocol.validation import ModelValidator
from kinesim.store import Store

from .credentials import IssuedCredentials

# The access key id the request being served was signed with (None: unsigned or unknown).
CALLER: ContextVar[str | None] = ContextVar("kinesim_sts_caller", default=None)
# The account of the request being served (None: the server's).
ACCOUNT: ContextVar[str | None] = ContextVar("kinesim_sts_account", default=None)

# What AWS takes as a role ARN (LocalStack's provider, whose texts its recordings of AWS check:
# test_sts_invalid_parameters, "nothing-valid-in-here is invalid").
_ROLE_ARN = re.compile(r"arn:[^:]+:[^:]+:[^:]*:[^:]*:[^:]+")
_ID_CHARS = string.ascii_uppercase + string.digits
CHAINED_MAX_S = 3600  # a role assumed with a role's credentials: at most one hour
# Session policies and tags are packed into the token; 100% is the most it holds. AWS does not
# publish the packing: kinesim counts the policy's compact JSON and the tags' text against 2048.
_PACKED_LIMIT = 2048


def _validation_error(message: str) -> AwsError:
    return AwsError("ValidationError", message)


def _invalid_value(message: str) -> AwsError:
    return AwsError("InvalidParameterValue", message)


class Principals(Protocol):
    """What STS asks IAM (kinesim.iam.principals)."""

    def key_identity(self, key_id: str | None) -> dict[str, str] | None: ...

    def role(self, role_arn: str) -> dict[str, Any] | None: ...


class _NoPrincipals:
    def key_identity(self, key_id: str | None) -> dict[str, str] | None:
        return None

    def role(self, role_arn: str) -> dict[str, Any] | None:
        return None


def role_id(role_arn: str) -> str:
    """A role's unique id, `AROA` and 17 characters, the same for every assumption of the role."""
    digest = hashlib.sha256(role_arn.encode()).digest()
    return "AROA" + "".join(_ID_CHARS[b % len(_ID_CHARS)] for b in digest[:17])


class StsService:
    def __init__(self, settings: Settings, store: Store,
                 principals_of: Callable[[str], Principals] | None = None,
                 key_account: Callable[[str], str] | None = None):
        self.settings = settings
        # An account's IAM principals; the account a long-term key belongs to (`scopes.Resolver`).
        self.principals_of = principals_of or (lambda account: _NoPrincipals())
        self.key_account = key_account or (lambda key: self.settings.account_id)
        self.validator = ModelValidator("sts")
        self.credentials = IssuedCredentials(store)
        self.operations: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "GetCallerIdentity": self.get_caller_identity,
            "AssumeRole": self.assume_role,
            "GetSessionToken": self.get_session_token,
            "GetAccessKeyInfo": self.get_access_key_info,
        }

    def close(self) -> None:
        """Nothing runs in the background."""

    def has_operation(self, action: str) -> bool:
        return action in self.operations

    def call(self, action: str, params: dict[str, Any]) -> dict[str, Any]:
        try:
            params = self.validator.parse(action, params)
        except AwsError as err:
            # The query protocol's code for the same sentence (LocalStack's recording of AWS,
            # "invalid-session-name": ValidationError, "1 validation error detected: ...").
            if err.code == "ValidationException":
                raise _validation_error(err.message or "") from None
            raise
        return self.operations[action](params)

    # identity

    @property
    def account(self) -> str:
        """The account of the request being served."""
        return ACCOUNT.get() or self.settings.account_id

    def root(self) -> dict[str, str]:
        return {"UserId": self.account, "Account": self.account, "Arn": f"arn:aws:iam::{self.account}:root"}

    def _caller(self) -> dict[str, Any] | None:
        """The issued credentials the request was signed with (None: the account's own)."""
        return self.credentials.lookup(CALLER.get())

    def _long_term_identity(self) -> dict[str, str]:
        """Who signs with a key STS did not issue: the IAM user whose key it is, else the root user."""
        return self.principals_of(self.account).key_identity(CALLER.get()) or self.root()

    def get_caller_identity(self, p: dict[str, Any]) -> dict[str, Any]:
        issued = self._caller()
        return dict(issued["identity"]) if issued else self._long_term_identity()

    def get_access_key_info(self, p: dict[str, Any]) -> dict[str, Any]:
        issued = self.credentials.lookup(p["AccessKeyId"])
        return {"Account": issued["identity"]["Account"] if issued else self.key_account(p["AccessKeyId"])}

    # credentials

    def assume_role(self, p: dict[str, Any]) -> dict[str, Any]:
        arn, session = p["RoleArn"], p["RoleSessionName"]
        if not _ROLE_ARN.fullmatch(arn):
            raise _validation_error(f"{arn} is invalid")
        caller = self._caller()
        duration = p.get("DurationSeconds", 3600)
        if caller is not None and ":assumed-role/" in caller["identity"]["Arn"] and duration > CHAINED_MAX_S:
            raise _validation_error("The requested DurationSeconds exceeds the 1 hour session limit for roles "
                                    "assumed by role chaining.")
        account = arn.split(":")[4] or self.account
        role = self.principals_of(account).role(arn)
        if role is not None and duration > role["MaxSessionDuration"]:
            raise _validation_error("The requested DurationSeconds exceeds the MaxSessionDuration set for this role.")
        packed = self._packed_size(p)
        role_name = role["RoleName"] if role else arn.split(":", 5)[5].rsplit("/", 1)[-1]
        assumed_id = f"{role['RoleId'] if role else role_id(arn)}:{session}"
        assumed_arn = f"arn:aws:sts::{account}:assumed-role/{role_name}/{session}"
        identity = {"UserId": assumed_id, "Account": account, "Arn": assumed_arn}
        out: dict[str, Any] = {
            "Credentials": self.credentials.issue(identity, duration),
            "AssumedRoleUser": {"AssumedRoleId": assumed_id, "Arn": assumed_arn}}
        if packed is not None:
            out["PackedPolicySize"] = packed
        if p.get("SourceIdentity") is not None:
            out["SourceIdentity"] = p["SourceIdentity"]
        return out

    def _packed_size(self, p: dict[str, Any]) -> int | None:
        """PackedPolicySize: sent only when the request passes session policies or tags (AWS's
        answer to a plain AssumeRole has none: LocalStack's recording, test_assume_role)."""
        tags = p.get("Tags") or []
        keys = [t["Key"].lower() for t in tags]
        if len(set(keys)) < len(keys):  # LocalStack's recording of AWS
            raise _invalid_value("Duplicate tag keys found. Please note that Tag keys are case insensitive.")
        if not {k.lower() for k in p.get("TransitiveTagKeys") or []} <= set(keys):
            raise _invalid_value("The specified transitive tag key must be included in the requested tags.")
        if not tags and p.get("Policy") is None and not p.get("PolicyArns"):
            return None
        size = sum(len(t["Key"]) + len(t["Value"]) for t in tags) + 64 * len(p.get("PolicyArns") or [])
        if p.get("Policy") is not None:
            try:
                # user_json: json.loads and json.dumps recurse (1,024 `[` fit in the 2,048 characters
                # a Policy may have, and were a RecursionError: a 500).
                size += len(user_json.dumps(user_json.loads(p["Policy"])))
            except ValueError:
                raise AwsError("MalformedPolicyDocument", "The policy is not in the valid JSON format.") from None
        percent = math.ceil(100 * size / _PACKED_LIMIT)
        if percent > 100:
            raise AwsError("PackedPolicyTooLarge", f"Packed policy consumes {percent}% of allotted space, please "
                                                   "use smaller policy.")
        return percent

    def get_session_token(self, p: dict[str, Any]) -> dict[str, Any]:
        caller = self._caller()
        if caller is not None:
            raise AwsError("AccessDenied", "Cannot call GetSessionToken with session credentials", 403)
        identity = self._long_term_identity()  # a user's session credentials are the user's
        return {"Credentials": self.credentials.issue(identity, p.get("DurationSeconds", 43200))}
