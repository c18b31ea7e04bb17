"""Who and where a request is: the AWS account and region whose resources it sees (issue 34).

Every resource lives in an account and a region, as on AWS. A request's **region** is the one it
is signed for (the SigV4 credential scope); an unsigned request, or one signed for a name that is
no region ("local", "test"), is in the server's own region (`--region`), as LocalStack does.

Its **account** is taken the way the established emulators take it, so that existing set-ups
carry over (LocalStack's `get_account_id_from_access_key_id`, moto's `get_current_account`):
- an access key id of 12 digits is the account itself (`AWS_ACCESS_KEY_ID=111111111111`);
- credentials STS issued (AssumeRole: `ASIA...`) belong to the account of the role assumed;
- an IAM user's access key (`AKIA...`) belongs to the account of its user;
- anything else is the server's account (`--account-id`, default 000000000000).

The key ids kinesim issues carry their account as AWS's own do (bits 7-46 of the base32-decoded
id after its four-letter prefix, the encoding `sts get-access-key-info` decodes), so a key's
account is known without a lookup; it is trusted only for keys kinesim knows (`Resolver`).
"""
from __future__ import annotations

import base64
import os
import re
import threading
from typing import Any, Callable, NamedTuple

from .config import partition_of

ENVIRON_KEY = "kinesim.scope"  # the request's Scope, set by the edge for every request
# The Scope whose services serve the request, when not its own: another account's resource that
# allows the call (kinesim/cross_account.py).
SERVED_BY = "kinesim.served_by"

# A region's name (us-east-1, eu-central-2, us-gov-west-1, cn-northwest-1, eu-isoe-west-1): signed for
# anything else, a request is in the server's own region.
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d{1,2}")
_ACCOUNT = re.compile(r"\d{12}")
_CREDENTIAL = re.compile(r"Credential=([^,\s]+)")
_SDK_FORM = "AWS4-HMAC-SHA256 Credential="
_SIGV2 = re.compile(r"AWS ([^:\s]+):")
_ACCOUNT_MASK = 0x7FFFFFFFFF80


class Scope(NamedTuple):
    """An account and a region (a tuple: it keys the services of every request, and hashes fast)."""
    account: str
    region: str

    @property
    def partition(self) -> str:
        return partition_of(self.region)


def is_region(name: str | None) -> bool:
    return bool(name) and _REGION.fullmatch(name) is not None


def is_account(text: str | None) -> bool:
    """Whether `text` is an account id: 12 digits."""
    return bool(text) and _ACCOUNT.fullmatch(text) is not None


def credential(environ: dict[str, Any]) -> list[str] | None:
    """The request's SigV4 credential, `[key_id, date, region, service, "aws4_request"]`, from its
    Authorization header or its X-Amz-Credential query parameter (a presigned URL); `[key_id]` of
    S3's older SigV2 (`AWS key:signature`, a presigned URL's AWSAccessKeyId); None unsigned."""
    authorization = environ.get("HTTP_AUTHORIZATION")
    if authorization:
        m = _CREDENTIAL.search(authorization)
        if m:
            return m.group(1).split("/")
        v2 = _SIGV2.match(authorization)
        return [v2.group(1)] if v2 else None
    query = environ.get("QUERY_STRING", "")
    if "X-Amz-Credential" not in query and "AWSAccessKeyId" not in query:
        return None
    from urllib.parse import parse_qs
    params = parse_qs(query)
    values = params.get("X-Amz-Credential")
    if values:
        return values[0].split("/")
    values = params.get("AWSAccessKeyId")
    return [values[0]] if values else None


def key_id(prefix: str, account: str) -> str:
    """A new access key id of `account`, 20 characters as AWS's: `prefix` (AKIA, ASIA) and 16 base32
    characters whose first 6 bytes hold the account in bits 7-46, the rest random."""
    head = (int(account) << 7) | (os.urandom(1)[0] & 0x7F)
    return prefix + base64.b32encode(head.to_bytes(6, "big") + os.urandom(4)).decode()


def account_of_key(key: str) -> str | None:
    """The account an AWS-formed access key id encodes (see `key_id`), or None for another form."""
    if len(key) != 20 or key[:4] not in ("AKIA", "ASIA"):
        return None
    try:
        raw = base64.b32decode(key[4:])
    except ValueError:
        return None
    return f"{(int.from_bytes(raw[:6], 'big') & _ACCOUNT_MASK) >> 7:012d}"


class Resolver:
    """The scope of each request. `issued_account(key)`: the account of credentials STS issued
    (None: not issued, or expired); `iam_has_key(key, account)`: whether that account's IAM holds
    the key. Answers are kept per credential (the Authorization header's, date included)."""

    def __init__(self, default: Scope, issued_account: Callable[[str], str | None],
                 iam_has_key: Callable[[str, str], bool]):
        self.default = default
        self._issued_account = issued_account
        self._iam_has_key = iam_has_key
        self._known: dict[tuple[str, str], Scope] = {}
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any]) -> Scope:
        scope = environ.get(ENVIRON_KEY)
        if scope is None:
            # The SDKs' Authorization header: its Credential (key/date/region/service/aws4_request)
            # is looked up whole, without parsing it, on every request but its client's first.
            authorization = environ.get("HTTP_AUTHORIZATION")
            if authorization is None:
                start = -1
            elif authorization.startswith(_SDK_FORM):  # the SDKs' form, the place known
                start = len(_SDK_FORM) - 11
            else:
                start = authorization.find("Credential=")
            text = authorization[start + 11:authorization.find(",", start)] if start >= 0 else None
            scope = self._known.get(text) if text else None
            if scope is None:
                scope = self.of_credential(credential(environ))
                if text:
                    self._remember(text, scope)
            environ[ENVIRON_KEY] = scope
        return scope

    def _remember(self, text: str, scope: Scope) -> None:
        with self._lock:
            if len(self._known) > 10_000:  # the credentials of a long-running server's clients: bounded
                self._known.clear()
            self._known[text] = scope

    def of_credential(self, parts: list[str] | None) -> Scope:
        if not parts:
            return self.default
        key = parts[0]
        region = parts[2] if len(parts) > 2 and is_region(parts[2]) else self.default.region
        if key.startswith("ASIA"):  # the issued credentials' account does not change
            return Scope(self._issued_account(key) or self.default.account, region)
        return Scope(self.account_of(key), region)

    def account_of(self, key: str) -> str:
        """The account of a long-term key id: 12 digits are the account; an IAM user's key is its
        user's account; anything else is the server's account."""
        if is_account(key):
            return key
        if key.startswith("AKIA"):
            encoded = account_of_key(key)
            if encoded is not None and encoded != self.default.account and self._iam_has_key(key, encoded):
                return encoded
        return self.default.account
