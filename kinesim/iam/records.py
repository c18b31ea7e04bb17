"""What IAM's entities share: their ids, ARNs, dates, paging and tags.

Each entity is a document in the store, of kind `iam-<entity>`, named by its name in lower case:
IAM's names are unique regardless of case ("Role names are not distinguished by case").
"""
from __future__ import annotations

import base64
import secrets
import string
import time
from typing import Any, Callable, Iterable

from kinesim.protocol.errors import AwsError

from .errors import invalid_input

_ID_CHARS = string.ascii_uppercase + string.digits
MAX_TAGS = 50


def unique_id(prefix: str) -> str:
    """An entity's id as AWS forms it: a four-letter prefix (AROA role, AIDA user, AGPA group,
    ANPA policy, AIPA instance profile) and 17 capital letters and digits."""
    return prefix + "".join(secrets.choice(_ID_CHARS) for _ in range(17))


def now() -> float:
    # whole seconds: AWS's CreateDate has none finer
    return float(int(time.time()))


def arn(partition: str, account: str, kind: str, path: str, name: str) -> str:
    return f"arn:{partition}:iam::{account}:{kind}{path}{name}"


def key(name: str) -> str:
    return name.lower()


def page(items: list[dict[str, Any]], params: dict[str, Any], sort_key: Callable[[dict[str, Any]], str],
         member: str) -> dict[str, Any]:
    """One page of a listing: `member` holds up to MaxItems (default 100) of `items` after Marker,
    in `sort_key` order; IsTruncated and Marker say whether and where it goes on. The marker is
    opaque to the client (AWS's are), here the base64 of the last answered item's key."""
    ordered = sorted(items, key=sort_key)
    marker = params.get("Marker")
    if marker is not None:
        try:
            after = base64.urlsafe_b64decode(marker.encode()).decode()
        except (ValueError, UnicodeDecodeError):
            raise invalid_input("Invalid Marker.") from None
        ordered = [i for i in ordered if sort_key(i) > after]
    limit = params.get("MaxItems") or 100
    out: dict[str, Any] = {member: ordered[:limit], "IsTruncated": len(ordered) > limit}
    if len(ordered) > limit:
        out["Marker"] = base64.urlsafe_b64encode(sort_key(ordered[limit - 1]).encode()).decode()
    return out


def under_path(items: Iterable[dict[str, Any]], prefix: str | None) -> list[dict[str, Any]]:
    return [i for i in items if i.get("Path", "/").startswith(prefix or "/")]


def merged_tags(current: list[dict[str, str]], new: list[dict[str, str]]) -> list[dict[str, str]]:
    """`current` with `new` added or replaced (keys compared regardless of case, as IAM does)."""
    keys = [t["Key"].lower() for t in new]
    if len(set(keys)) < len(keys):
        raise invalid_input("Duplicate tag keys found. Please note that Tag keys are case insensitive.")
    merged = {t["Key"].lower(): t for t in current}
    merged.update({t["Key"].lower(): {"Key": t["Key"], "Value": t["Value"]} for t in new})
    if len(merged) > MAX_TAGS:
        raise AwsError("LimitExceeded", f"Cannot exceed quota for TagsPerEntity: {MAX_TAGS}", 409)
    return list(merged.values())


def without_tags(current: list[dict[str, str]], keys: list[str]) -> list[dict[str, str]]:
    gone = {k.lower() for k in keys}
    return [t for t in current if t["Key"].lower() not in gone]


class Table:
    """One kind of entity in the store, by name (any case)."""

    def __init__(self, store: Any, kind: str):
        self.store = store
        self.kind = f"iam-{kind}"

    def get(self, name: str) -> dict[str, Any] | None:
        return self.store.document(self.kind, key(name))

    def put(self, name: str, doc: dict[str, Any]) -> None:
        self.store.put_document(self.kind, key(name), doc)

    def delete(self, name: str) -> None:
        self.store.delete_document(self.kind, key(name))

    def all(self) -> list[dict[str, Any]]:
        return list(self.store.documents(self.kind).values())
