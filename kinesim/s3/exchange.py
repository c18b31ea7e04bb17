"""One S3 request and its response, as the operation handlers see them."""
from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable
from xml.etree import ElementTree as ET

from .. import scopes
from .errors import S3Error, invalid_argument, invalid_part_number, malformed_xml
from .rules import MAX_PARTS
from .payload import Framed, RequestBody
from .xmldoc import CONTENT_TYPE, parse, serialize

if TYPE_CHECKING:
    from ..config import Settings
    from .objects import ObjectStore

MAX_XML_BODY = 4 * 1024 * 1024  # DeleteObjects' 1000 keys of 1 KiB fit several times
_DIGITS = re.compile(r"[0-9]{1,9}")  # ASCII digits only: int() would also take "+1", " 1" and "١"


@dataclass
class Request:
    environ: dict[str, Any]
    method: str
    bucket: str | None
    key: str                    # "" for a bucket (or service) request
    query: dict[str, str]       # first value of each parameter
    objects: "ObjectStore"
    settings: "Settings"
    framed: Framed = field(init=False)

    def __post_init__(self) -> None:
        self.framed = Framed.of(self.environ)

    def header(self, name: str, default: str | None = None) -> str | None:
        key = name.upper().replace("-", "_")
        if key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            return self.environ.get(key) or default
        return self.environ.get("HTTP_" + key, default)

    def headers_with_prefix(self, prefix: str) -> dict[str, str]:
        """{name without the prefix (lower case): value} of the headers starting with `prefix`."""
        env_prefix = "HTTP_" + prefix.upper().replace("-", "_")
        return {k[len(env_prefix):].lower().replace("_", "-"): v for k, v in self.environ.items()
                if k.startswith(env_prefix)}

    def body(self) -> RequestBody:
        return RequestBody(self.environ, self.framed)

    def small_body(self) -> bytes:
        """A configuration request's whole body, at most MAX_XML_BODY bytes (MalformedXML past
        that, as S3 answers), checked against Content-MD5 / a flexible checksum if sent."""
        body = self.body()
        data = bytearray()
        while chunk := body.read():
            data += chunk
            if len(data) > MAX_XML_BODY:
                raise malformed_xml()
        body.verify(hashlib.md5(data).digest())
        return bytes(data)

    def xml_body(self, required: bool = True) -> ET.Element | None:
        """The request's XML document (checked against Content-MD5 / a flexible checksum if sent)."""
        data = self.small_body()
        if not data.strip():
            if required:
                raise malformed_xml()
            return None
        return parse(bytes(data))

    def int_param(self, name: str, default: int, message: str, minimum: int = 0) -> int:
        value = self.query.get(name)
        if value is None:
            return default
        try:
            number = int(value)
        except ValueError:
            raise invalid_argument(message, name, value) from None
        if number < minimum or number > 2**31 - 1:
            raise invalid_argument(message, name, value)
        return number

    def part_number(self) -> int | None:
        """The partNumber parameter (UploadPart, UploadPartCopy, GetObject, HeadObject); None
        when absent; InvalidArgument unless it is an integer from 1 to 10000."""
        value = self.query.get("partNumber")
        if value is None:
            return None
        if not _DIGITS.fullmatch(value) or not 1 <= int(value) <= MAX_PARTS:
            raise invalid_part_number(value)
        return int(value)

    @functools.cached_property
    def scope(self) -> scopes.Scope:
        """The caller's account and the region the request is in: the edge's (`scopes.ENVIRON_KEY`).
        Without it, worked out here as the edge does for the simple cases: a 12-digit access key id
        is the account, any other the server's; the region signed for, else the server's."""
        scope = self.environ.get(scopes.ENVIRON_KEY)
        if scope is not None:
            return scope
        parts = scopes.credential(self.environ) or []
        account = parts[0] if parts and scopes.is_account(parts[0]) else self.settings.account_id
        region = parts[2] if len(parts) > 2 and scopes.is_region(parts[2]) else self.settings.region
        return scopes.Scope(account, region)

    @property
    def region(self) -> str:
        """The region the client signed for (one endpoint serves them all), else the server's."""
        return self.scope.region

    @property
    def account(self) -> str:
        """The caller's account id."""
        return self.scope.account

    @functools.cached_property
    def signed_region(self) -> str | None:
        """The region the request is signed (or presigned) for; None unsigned, or signed for a name
        that is no region's ("local", "test"; then it is in the server's region)."""
        parts = scopes.credential(self.environ)
        return self.scope.region if parts and len(parts) > 2 and scopes.is_region(parts[2]) else None

    @property
    def presigned(self) -> bool:
        """Whether the request's credential is in its query (a presigned URL), not a header."""
        return not self.environ.get("HTTP_AUTHORIZATION") and "X-Amz-Credential" in self.environ.get("QUERY_STRING", "")

    @property
    def host(self) -> str:
        return self.environ.get("HTTP_HOST") or f"{self.settings.host}:{self.settings.port}"

    @property
    def owner_id(self) -> str:
        """The caller's canonical user id."""
        return canonical_id(self.account)


def canonical_id(account: str) -> str:
    """An account's S3 canonical user id: 64 hex digits, derived from the account so it is stable."""
    return hashlib.sha256(account.encode()).hexdigest()


@dataclass
class Response:
    status: int = 200
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes | Iterable[bytes] = b""
    length: int | None = None  # Content-Length of a streamed body (or of what HEAD describes)


def xml_response(root: ET.Element, status: int = 200, headers: list[tuple[str, str]] | None = None) -> Response:
    return Response(status, [("Content-Type", CONTENT_TYPE)] + list(headers or []), serialize(root))


def not_implemented(what: str = "") -> S3Error:
    return S3Error("NotImplemented", "A header you provided implies functionality that is not implemented", 501,
                   Header=what or None)
