"""The temporary credentials STS issues, kept until they expire.

Each set is a document in the store (kind "sts-credentials", named by its access key id):
`{"secret", "token", "expires", "identity": {"Arn", "UserId", "Account"}}`, written
before the credentials are handed out, so that they keep working across a restart. As a mapping
(access key id -> secret) the set is what `--verify-signatures` checks signatures against beside
the configured credentials: an expired set is no longer in it.
"""
from __future__ import annotations

import base64
import os
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from kinesim.scopes import key_id
from kinesim.store import Store

KIND = "sts-credentials"


class IssuedCredentials(Mapping[str, str]):
    def __init__(self, store: Store, clock=time.time):
        self.store = store
        self.clock = clock
        self.lock = threading.Lock()
        self._issued: dict[str, dict[str, Any]] = {}
        now = clock()
        expired = []
        for key, doc in store.documents(KIND).items():
            if doc["expires"] <= now:
                expired.append(key)
            else:
                self._issued[key] = doc
        if expired:
            store.delete_documents(KIND, expired)

    def issue(self, identity: dict[str, str], duration_s: int) -> dict[str, Any]:
        """A new set of credentials for `identity` (what GetCallerIdentity answers for them), as the
        `Credentials` shape."""
        expires = int(self.clock()) + duration_s
        # Temporary credentials' key ids begin ASIA (long-term ones AKIA) and carry the account of the
        # identity they are issued for, as AWS's do (kinesim.scopes).
        key = key_id("ASIA", identity["Account"])
        doc = {"secret": base64.b64encode(os.urandom(30)).decode(),
               # AWS's tokens are long, opaque base64 (`IQoJb3JpZ2luX2Vj...` today).
               "token": base64.b64encode(b"!\n\torigin_ec" + os.urandom(300)).decode(),
               "expires": expires, "identity": identity}
        with self.lock:
            self.store.put_document(KIND, key, doc)
            self._issued[key] = doc
            self._forget_expired()
        return {"AccessKeyId": key, "SecretAccessKey": doc["secret"], "SessionToken": doc["token"],
                "Expiration": float(expires)}

    def lookup(self, key: str | None) -> dict[str, Any] | None:
        """The issued set of `key`, while it has not expired."""
        doc = self._issued.get(key) if key else None
        return doc if doc is not None and doc["expires"] > self.clock() else None

    def _forget_expired(self) -> None:
        now = self.clock()
        expired = [k for k, doc in self._issued.items() if doc["expires"] <= now]
        for key in expired:
            del self._issued[key]
        if expired:
            self.store.delete_documents(KIND, expired)

    # Mapping: access key id -> secret, for the signature verifier

    def __getitem__(self, key: str) -> str:
        doc = self.lookup(key)
        if doc is None:
            raise KeyError(key)
        return doc["secret"]

    def __iter__(self) -> Iterator[str]:
        return iter([k for k in list(self._issued) if self.lookup(k) is not None])

    def __len__(self) -> int:
        return sum(1 for _ in self)
