"""SigV4 signature verification (`kinesim serve --verify-signatures`): for a server that other
machines can reach, only requests signed with a configured secret are served, as on AWS.

The server recomputes the signature from the request as received (AWS's "Create a signed AWS API
request" steps: canonical request, string to sign, signing key) and compares. Paths are
canonicalised the way the SDKs sign them: S3 signs the URI path as sent, every other service
encodes it once more (botocore's `SigV4Auth` vs `S3SigV4Auth`). The payload hash is the
`X-Amz-Content-SHA256` header when sent (S3), else the SHA-256 of the body; presigned URLs sign
`UNSIGNED-PAYLOAD`. Not checked: the chunk signatures of `STREAMING-AWS4-HMAC-SHA256-PAYLOAD`
uploads (the seed signature is), and session tokens (any `X-Amz-Security-Token` is taken).
"""
from __future__ import annotations

import base64
import hashlib
import io
import hmac
import time
from calendar import timegm
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import parse_qsl, quote

from .auth import authorization_params, credential_scope
from .body import read_bounded
from .errors import AwsError

ALGORITHM = "AWS4-HMAC-SHA256"
MAX_SKEW_S = 15 * 60  # AWS refuses requests signed more than 15 minutes from its clock
UNSIGNED = "UNSIGNED-PAYLOAD"
MISMATCH = ("The request signature we calculated does not match the signature you provided. Check your AWS "
            "Secret Access Key and signing method. Consult the service documentation for details.")


@dataclass(frozen=True)
class SignatureError:
    """Why a request's signature was refused, in the terms of the service it was sent to: `kind` is
    "mismatch", "unknown-key", "expired" or "missing"."""
    kind: str
    message: str


def parse_credentials(pairs: list[str]) -> dict[str, str]:
    """`["AKID:SECRET", ...]` -> {AKID: SECRET}."""
    secrets = {}
    for pair in pairs:
        key, sep, secret = pair.partition(":")
        if not sep or not key or not secret:
            raise ValueError(f"a credential is KEY_ID:SECRET, not {pair!r}")
        secrets[key] = secret
    return secrets


def _signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def _amz_time(text: str) -> float | None:
    try:
        return float(timegm(time.strptime(text, "%Y%m%dT%H%M%SZ")))
    except (ValueError, TypeError):
        return None


def _canonical_path(path_info: str, service: str) -> str:
    try:
        path = path_info.encode("latin-1").decode("utf-8")  # WSGI gives the decoded path as latin-1
    except UnicodeError:
        path = path_info
    encoded = quote(path or "/", safe="/~")
    return encoded if service == "s3" else quote(encoded, safe="/~")


def _canonical_query(query: str, presigned: bool) -> str:
    pairs = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True)
             if not (presigned and k == "X-Amz-Signature")]
    encoded = sorted((quote(k, safe="-_.~"), quote(v, safe="-_.~")) for k, v in pairs)
    return "&".join(f"{k}={v}" for k, v in encoded)


def _header_value(environ: Mapping[str, Any], name: str) -> str:
    key = name.upper().replace("-", "_")
    value = environ.get(key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else "HTTP_" + key, "")
    return " ".join(str(value).split())


def canonical_request(environ: Mapping[str, Any], service: str, signed_headers: str, payload_hash: str,
                      presigned: bool) -> str:
    return "\n".join([
        environ.get("REQUEST_METHOD", "GET"),
        _canonical_path(environ.get("PATH_INFO", "/"), service),
        _canonical_query(environ.get("QUERY_STRING", ""), presigned),
        "".join(f"{name}:{_header_value(environ, name)}\n" for name in signed_headers.split(";")),
        signed_headers,
        payload_hash,
    ])


def _signature(secret: str, amz_date: str, scope: list[str], canonical: str) -> str:
    """The hex signature of a canonical request; `scope` is [key id, date, region, service,
    "aws4_request"]."""
    to_sign = "\n".join([ALGORITHM, amz_date, "/".join(scope[1:]), hashlib.sha256(canonical.encode()).hexdigest()])
    return hmac.new(_signing_key(secret, *scope[1:4]), to_sign.encode(), hashlib.sha256).hexdigest()


def sign(method: str, host: str, path: str, headers: dict[str, str], body: bytes, key_id: str, secret: str,
         region: str, service: str, now: float | None = None) -> dict[str, str]:
    """`headers` with X-Amz-Date and the Authorization of a SigV4 signature over them, the host and
    the body: what botocore sends, for kinesim's own short-lived commands (see json_client)."""
    amz_date = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    signed = {**headers, "Host": host, "X-Amz-Date": amz_date}
    names = sorted(name.lower() for name in signed)
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path,
               **{"HTTP_" + name.upper().replace("-", "_"): value for name, value in signed.items()}}
    environ["CONTENT_TYPE"] = environ.pop("HTTP_CONTENT_TYPE", "")
    scope = [key_id, amz_date[:8], region, service, "aws4_request"]
    canonical = canonical_request(environ, service, ";".join(names), hashlib.sha256(body).hexdigest(), False)
    signature = _signature(secret, amz_date, scope, canonical)
    return {**headers, "X-Amz-Date": amz_date,
            "Authorization": f"{ALGORITHM} Credential={'/'.join(scope)}, SignedHeaders={';'.join(names)}, "
                             f"Signature={signature}"}


class Verifier:
    def __init__(self, secrets: dict[str, str], clock=time.time):
        self.secrets = secrets
        self.clock = clock

    def check(self, environ: Mapping[str, Any], body: bytes | None) -> SignatureError | None:
        """None when the request is signed with a known secret; `body` is needed unless the request
        names its payload hash (S3) or is presigned."""
        query = environ.get("QUERY_STRING", "")
        authorization = environ.get("HTTP_AUTHORIZATION")
        presigned = not authorization and "X-Amz-Signature" in query
        if authorization:
            if not authorization.startswith(ALGORITHM + " "):
                return SignatureError("missing", "Only AWS4-HMAC-SHA256 signatures are accepted.")
            params = authorization_params(authorization)
            signed_headers, signature = params.get("SignedHeaders") or "", params.get("Signature") or ""
            amz_date = environ.get("HTTP_X_AMZ_DATE", "")
            scope = credential_scope({"authorization": authorization})
        elif "Signature=" in query and "AWSAccessKeyId=" in query:
            return self._check_v2_query(environ)
        elif presigned:
            q = dict(parse_qsl(query, keep_blank_values=True))
            signed_headers, signature = q.get("X-Amz-SignedHeaders", ""), q.get("X-Amz-Signature", "")
            amz_date = q.get("X-Amz-Date", "")
            scope = credential_scope({}, query)
        else:
            return SignatureError("missing", "Missing Authentication Token")
        if not scope or len(scope) != 5 or scope[4] != "aws4_request":
            return SignatureError("missing", "Credential should be scoped to a valid region, service and "
                                             "aws4_request.")
        key_id, date, region, service, _ = scope
        secret = self.secrets.get(key_id)
        if secret is None:
            return SignatureError("unknown-key", "The security token included in the request is invalid.")
        signed_at = _amz_time(amz_date)
        if signed_at is None or not amz_date.startswith(date):
            return SignatureError("mismatch", MISMATCH)
        now = self.clock()
        if presigned:
            try:
                expires = int(dict(parse_qsl(query)).get("X-Amz-Expires", "604800"))
            except ValueError:
                return SignatureError("mismatch", MISMATCH)
            if now > signed_at + expires:
                return SignatureError("expired", "Request has expired")
        elif abs(now - signed_at) > MAX_SKEW_S:
            return SignatureError("expired", f"Signature expired: {amz_date} is now earlier or later than "
                                             f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(now))} (15 min. skew).")
        if presigned:
            payload_hash = UNSIGNED
        else:
            payload_hash = environ.get("HTTP_X_AMZ_CONTENT_SHA256") or hashlib.sha256(body or b"").hexdigest()
        canonical = canonical_request(environ, service, signed_headers, payload_hash, presigned)
        expected = _signature(secret, amz_date, scope, canonical)
        if not hmac.compare_digest(expected, signature):
            return SignatureError("mismatch", MISMATCH)
        return None


    def _check_v2_query(self, environ: Mapping[str, Any]) -> SignatureError | None:
        """An S3 URL presigned with signature version 2 (`AWSAccessKeyId`, `Expires`, `Signature`):
        what boto3's `generate_presigned_url` makes for S3 unless told `signature_version="s3v4"`."""
        q = dict(parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True))
        secret = self.secrets.get(q.get("AWSAccessKeyId", ""))
        if secret is None:
            return SignatureError("unknown-key", "The security token included in the request is invalid.")
        try:
            expires = int(q.get("Expires", ""))
        except ValueError:
            return SignatureError("mismatch", MISMATCH)
        if self.clock() > expires:
            return SignatureError("expired", "Request has expired")
        amz = sorted((k[5:].lower().replace("_", "-"), " ".join(str(v).split())) for k, v in environ.items()
                     if k.startswith("HTTP_X_AMZ_"))
        resource = _canonical_path(environ.get("PATH_INFO", "/"), "s3")
        subresources = sorted((k, v) for k, v in q.items() if k in V2_SUBRESOURCES)
        if subresources:
            resource += "?" + "&".join(f"{k}={v}" if v else k for k, v in subresources)
        to_sign = "\n".join([environ.get("REQUEST_METHOD", "GET"), _header_value(environ, "content-md5"),
                             _header_value(environ, "content-type"), str(expires),
                             *(f"{k}:{v}" for k, v in amz), resource])
        expected = base64.b64encode(hmac.new(secret.encode(), to_sign.encode(), hashlib.sha1).digest()).decode()
        if not hmac.compare_digest(expected, q.get("Signature", "")):
            return SignatureError("mismatch", MISMATCH)
        return None


# The query parameters that signature version 2 signs (S3's sub-resources and response overrides).
V2_SUBRESOURCES = frozenset((
    "accelerate", "acl", "cors", "defaultObjectAcl", "location", "logging", "partNumber", "policy",
    "requestPayment", "torrent", "versioning", "versionId", "versions", "website", "uploads", "uploadId",
    "response-content-type", "response-content-language", "response-expires", "response-cache-control",
    "response-content-disposition", "response-content-encoding", "delete", "lifecycle", "tagging", "restore",
    "storageClass", "notification", "replication", "analytics", "metrics", "inventory", "select", "select-type",
    "object-lock",
))

# How each kind of refusal reads in each protocol family (AWS's codes).
_JSON_CODES = {"mismatch": "InvalidSignatureException", "unknown-key": "UnrecognizedClientException",
               "expired": "InvalidSignatureException", "missing": "MissingAuthenticationTokenException"}
_S3_CODES = {"mismatch": "SignatureDoesNotMatch", "unknown-key": "InvalidAccessKeyId",
             "expired": "AccessDenied", "missing": "AccessDenied"}


def as_aws_error(refusal: SignatureError, service: str) -> AwsError:
    """The error a service answers: JSON services 400 (Kinesis, Firehose), REST ones 403."""
    if service == "s3":
        message = ("The AWS Access Key Id you provided does not exist in our records."
                   if refusal.kind == "unknown-key" else refusal.message)
        return AwsError(_S3_CODES[refusal.kind], message, 403)
    return AwsError(_JSON_CODES[refusal.kind], refusal.message, 400 if service == "json" else 403)


BODY_LIMIT = 128 * 1024 * 1024  # bodies hashed in memory (Lambda packages reach ~70 MB as JSON)


def verify_request(verifier: Verifier, environ: dict[str, Any], service: str) -> AwsError | None:
    """Check a request's signature before it is served; the error to answer, or None. `service` is
    "json" (Kinesis, Firehose), "lambda" or "s3". A body that must be hashed is read here and put
    back as `wsgi.input` for the service to read."""
    body = None
    query = environ.get("QUERY_STRING", "")
    presigned = "HTTP_AUTHORIZATION" not in environ and ("X-Amz-Signature" in query or "Signature=" in query)
    if not presigned and "HTTP_X_AMZ_CONTENT_SHA256" not in environ:
        if service == "s3" and "HTTP_AUTHORIZATION" in environ:
            return AwsError("InvalidRequest", "Missing required header for this request: x-amz-content-sha256", 400)
        body = _buffer_body(environ)
        if body is None:
            return AwsError("RequestEntityTooLargeException", "Request must be smaller than 128 MiB to be signed "
                                                              "without an X-Amz-Content-SHA256 header", 413)
    refusal = verifier.check(environ, body)
    return None if refusal is None else as_aws_error(refusal, service)


def _buffer_body(environ: dict[str, Any]) -> bytes | None:
    """The body, read whole (None past BODY_LIMIT) and put back for the service to read."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    body = read_bounded(environ, length, BODY_LIMIT)
    if body is not None:
        environ["wsgi.input"] = io.BytesIO(body)
    return body
