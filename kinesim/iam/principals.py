"""Who signs a request, as IAM knows it: what the rest of kinesim asks of IAM, through the
composition root (`services.py`), never by reaching into the IAM service.

- `secrets`: access key id -> secret of the users' Active keys, for `--verify-signatures` beside
  the configured credentials and STS's (an Inactive or deleted key is not in it: refused as a key
  AWS does not know).
- `key_identity`: the user an Active key belongs to, as STS's GetCallerIdentity answers for it.
- `role`: a role of the account by its ARN (STS's AssumeRole answers with its RoleId), or by its
  name (`role_by_name`: a resource policy names an assumed role's session by the role's ARN).

It reads the store's IAM documents directly, without the IAM service's model or lock (reads of
whole documents), so that asking does not make the IAM service.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from kinesim.scopes import account_of_key

from .records import Table

LONG_TERM_PREFIX = "AKIA"  # the ids CreateAccessKey gives (temporary credentials' begin ASIA)


class Principals:
    def __init__(self, store: Any, account: str):
        self.account = account
        self.keys = Table(store, "access-key")
        self.users = Table(store, "user")
        self.roles = Table(store, "role")
        self.secrets = _ActiveSecrets(self)

    def active_key(self, key_id: str | None) -> dict[str, Any] | None:
        if not key_id or not key_id.startswith(LONG_TERM_PREFIX):
            return None  # not one of IAM's: no read of the store
        key = self.keys.get(key_id)
        if key is None or key["AccessKeyId"] != key_id or key["Status"] != "Active":
            return None
        return key

    def key_identity(self, key_id: str | None) -> dict[str, str] | None:
        """GetCallerIdentity's answer for a request signed with the key: the user's ARN and id."""
        key = self.active_key(key_id)
        user = self.users.get(key["UserName"]) if key else None
        if user is None:
            return None
        return {"UserId": user["UserId"], "Account": self.account, "Arn": user["Arn"]}

    def role_by_name(self, name: str) -> dict[str, Any] | None:
        return self.roles.get(name)

    def role(self, role_arn: str) -> dict[str, Any] | None:
        """The account's role whose ARN is `role_arn` (its path and name as IAM has them)."""
        name = role_arn.rsplit("/", 1)[-1]
        role = self.roles.get(name) if name else None
        return role if role is not None and role["Arn"] == role_arn else None


class _ActiveSecrets(Mapping[str, str]):
    def __init__(self, principals: Principals):
        self.principals = principals

    def __getitem__(self, key_id: str) -> str:
        key = self.principals.active_key(key_id)
        if key is None:
            raise KeyError(key_id)
        return key["SecretAccessKey"]

    def __iter__(self) -> Iterator[str]:
        return iter([k["AccessKeyId"] for k in self.principals.keys.all() if k["Status"] == "Active"])

    def __len__(self) -> int:
        return sum(1 for _ in self)


class EveryAccountsSecrets(Mapping[str, str]):
    """The secrets of the Active keys of every account's IAM users, for --verify-signatures: a key
    kinesim made carries its account (kinesim.scopes), so one lookup finds it; a key made before
    keys carried it is the server's account's (`own`)."""

    def __init__(self, own: Principals, principals_of: Callable[[str], Principals]):
        self.own = own
        self.principals_of = principals_of

    def __getitem__(self, key_id: str) -> str:
        if key_id in self.own.secrets:
            return self.own.secrets[key_id]
        account = account_of_key(key_id)
        if account is None or account == self.own.account:
            raise KeyError(key_id)
        return self.principals_of(account).secrets[key_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self.own.secrets)

    def __len__(self) -> int:
        return len(self.own.secrets)
