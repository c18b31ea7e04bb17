"""S3's REST API (the subset boto3's `s3` client, `aws s3` and s3transfer use) as a WSGI app.

Addressing: path style (`/bucket/key`) and virtual-host style (`Host: bucket.localhost[:port]`).
Each request goes to one handler, chosen by method, by whether it names the service, a bucket or
an object, and by its sub-resource query parameter (`?uploads`, `?delete`, `?location`, ...), as
botocore's model of S3 lays the operations out (a bucket's configurations, `?cors`, `?lifecycle`,
`?policy`, ..., are `bucket_config_ops`'). A sub-resource S3 has and kinesim does not (`?acl`,
`?website`, an object's `?tagging`, ...) is answered `501 NotImplemented`, never with a made-up result.

Credentials are not checked (as for every kinesim service): signed, presigned and anonymous
requests are all served. Buckets belong to accounts (the caller's: `Request.scope`) and are in
regions, in one namespace of names; a request signed for the wrong region is sent to the right one
as S3 does, and another account's request is served as the bucket's policy allows (`access.py`).
"""
from __future__ import annotations

import base64
import logging
import os
import re
import uuid
from typing import TYPE_CHECKING, Any, Callable, Iterable
from urllib.parse import parse_qsl

from ..protocol import auth
from ..protocol.errors import AwsError
from . import bucket_config_ops, bucket_ops, multipart_ops, notification_ops, object_ops
from .access import admit
from .errors import S3Error, invalid_argument, invalid_request, method_not_allowed
from .exchange import Request, Response, not_implemented
from .xmldoc import CONTENT_TYPE, element, serialize

if TYPE_CHECKING:
    from ..config import Settings
    from ..iam.evaluate import Caller
    from .objects import ObjectStore

log = logging.getLogger("kinesim.s3")

Handler = Callable[[Request], Response]
VIRTUAL_HOST_SUFFIX = ".localhost"
# An error answered before the body was read: read up to this much of it so the connection can be
# reused (more than that and the connection is closed instead).
DRAIN_LIMIT = 1024 * 1024
# Lambda's REST API paths start with a date (/2015-03-31/functions, /2018-10-31/layers, ...).
_REST_API_VERSION = re.compile(r"/\d{4}-\d{2}-\d{2}(/|$)")

# S3 sub-resources that kinesim does not implement (answered 501).
UNSUPPORTED = frozenset({
    "accelerate", "acl", "analytics", "attributes", "cors", "encryption", "intelligent-tiering", "inventory",
    "legal-hold", "lifecycle", "logging", "metadataConfiguration", "metadataTable", "metrics",
    "object-lock", "ownershipControls", "policy", "policyStatus", "publicAccessBlock", "renameObject", "replication",
    "requestPayment", "restore", "retention", "select", "session", "tagging", "torrent", "website",
    "abac",
})

# Not S3's (a documented deviation: AWS sends neither header). On AWS a bucket's content is served
# from S3's hosts, never from the console's; kinesim serves both, and every API, from one origin, and
# DESIGN.md's rule is "Content users stored (objects, records) is never served as the console's own
# origin". So every S3 answer (an object by GetObject, HeadObject, a presigned URL, virtual-host
# style; listings and errors, which name stored keys) is sandboxed: a page opened from a bucket
# renders but runs no script and submits no form, and its origin is opaque (its requests carry
# `Origin: null`, which the edge's guard refuses) instead of this server's. No allowance is given
# (not even allow-scripts): a script of such a page, though of no origin, would still run in a page
# served from this machine, which browsers let reach the user's other local services where a public
# site's page must ask (Chrome's Local Network Access). Images, PDFs and text still display (checked
# in Chromium); SDKs, with CORS or without, ignore both headers. `nosniff`: an object is what its
# Content-Type says, never a script or style a browser sniffed in it.
STORED_CONTENT_HEADERS = [("Content-Security-Policy", "sandbox"), ("X-Content-Type-Options", "nosniff")]

_STATUS_TEXT = {200: "OK", 204: "No Content", 206: "Partial Content", 304: "Not Modified", 400: "Bad Request",
                403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 409: "Conflict",
                411: "Length Required", 412: "Precondition Failed", 416: "Requested Range Not Satisfiable",
                500: "Internal Server Error", 501: "Not Implemented"}


def virtual_host_bucket(environ: dict[str, Any]) -> str | None:
    """The bucket of a virtual-host style request (`Host: my-bucket.localhost:4566`), else None."""
    host = environ.get("HTTP_HOST", "").rsplit(":", 1)[0].lower() if "]" not in environ.get("HTTP_HOST", "") else ""
    if host.endswith(VIRTUAL_HOST_SUFFIX) and len(host) > len(VIRTUAL_HOST_SUFFIX):
        return host[:-len(VIRTUAL_HOST_SUFFIX)]
    return None


def is_s3_request(environ: dict[str, Any]) -> bool:
    """Whether the edge should hand this request to S3: virtual-host style; signed for service "s3";
    or, unsigned, a path-style request that is no other service's (JSON protocols carry
    X-Amz-Target; kinesim's own API is under /_kinesim/; Lambda's REST paths start with an API date;
    a POST to "/" is a JSON-protocol call without its target, which Kinesis answers)."""
    if "HTTP_X_AMZ_TARGET" in environ:
        return False
    if virtual_host_bucket(environ) is not None:
        return True
    scope = auth.credential_scope({"authorization": environ["HTTP_AUTHORIZATION"]}) \
        if "HTTP_AUTHORIZATION" in environ else None
    if scope is not None and len(scope) >= 4 and scope[3]:
        return scope[3] == "s3"  # the service the client signed for says it all
    path = environ.get("PATH_INFO", "/")
    if path.startswith("/_kinesim/") or _REST_API_VERSION.match(path):
        return False
    return not (path in ("", "/") and environ.get("REQUEST_METHOD") == "POST")


def _route(method: str, bucket: str | None, key: str, query: dict[str, str], environ: dict[str, Any]) -> Handler:
    copy = "HTTP_X_AMZ_COPY_SOURCE" in environ
    if bucket is None:
        if method in ("GET", "HEAD"):
            return bucket_ops.list_buckets
        raise method_not_allowed(method, "SERVICE")
    if key and method == "GET" and "uploadId" not in query:
        # Bucket sub-resources asked of an object: S3's answers, as versitygw's router (held to
        # S3 by its tests) gives them.
        if "uploads" in query:
            raise invalid_request("Key is not expected for the GET method ?uploads subresource")
        if "versions" in query:
            raise invalid_request("There is no such thing as the ?versions sub-resource for a key")
    configuration = None if key else bucket_config_ops.handler(method, query)
    if configuration is not None:
        return configuration
    unsupported = UNSUPPORTED.intersection(query)
    if unsupported:
        raise not_implemented(sorted(unsupported)[0])
    if "notification" in query and not key and method in ("GET", "PUT"):
        return notification_ops.get_bucket_notification_configuration if method == "GET" \
            else notification_ops.put_bucket_notification_configuration
    if not key:
        if "versions" in query:
            if method != "GET":
                raise method_not_allowed(method, "BUCKET")
            return bucket_ops.list_object_versions
        if method == "GET":
            if "location" in query:
                return bucket_ops.get_bucket_location
            if "uploads" in query:
                return multipart_ops.list_multipart_uploads
            if query.get("list-type") == "2":
                return bucket_ops.list_objects_v2
            return bucket_ops.list_objects
        if method == "PUT":
            return bucket_ops.create_bucket
        if method == "HEAD":
            return bucket_ops.head_bucket
        if method == "DELETE":
            return bucket_ops.delete_bucket
        if method == "POST" and "delete" in query:
            return object_ops.delete_objects
        if method == "POST":
            raise not_implemented("POST Object")  # browser form uploads
        raise method_not_allowed(method, "BUCKET")
    if method == "PUT":
        if "uploadId" in query and "partNumber" in query:
            return multipart_ops.upload_part_copy if copy else multipart_ops.upload_part
        if "partNumber" in query:
            # S3's answer, its odd ArgumentValue included (quoted in versitygw issues 1226, 1237).
            raise invalid_argument("This operation does not accept partNumber without uploadId", "partNumber",
                                   "partNumber")
        if "uploadId" in query:
            # An upload takes DELETE, POST and GET, not PUT (S3's answer, versitygw issue 1236).
            raise method_not_allowed(method, "UPLOAD", ("DELETE", "POST", "GET"))
        return object_ops.copy_object if copy else object_ops.put_object
    if method == "GET":
        return multipart_ops.list_parts if "uploadId" in query else object_ops.get_object
    if method == "HEAD":
        return object_ops.head_object
    if method == "DELETE":
        return multipart_ops.abort_multipart_upload if "uploadId" in query else object_ops.delete_object
    if method == "POST":
        if "uploads" in query:
            return multipart_ops.create_multipart_upload
        if "uploadId" in query:
            return multipart_ops.complete_multipart_upload
    raise method_not_allowed(method, "OBJECT")


class S3App:
    """WSGI app: `S3App(object_store, settings)(environ, start_response)`."""

    def __init__(self, objects: "ObjectStore", settings: "Settings",
                 caller_of: "Callable[[dict[str, Any]], Caller] | None" = None):
        self.objects = objects
        self.settings = settings
        self.caller_of = caller_of  # who signs a request, for another account's bucket's policy

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        request_id = uuid.uuid4().hex[:16].upper()
        host_id = base64.b64encode(os.urandom(48)).decode()
        # The same ids in an event notification of this request as in its response headers.
        environ[notification_ops.REQUEST_ID], environ[notification_ops.HOST_ID] = request_id, host_id
        method = environ.get("REQUEST_METHOD", "GET")
        req = None
        try:
            req = self._request(environ, method)
            handler = _route(method, req.bucket, req.key, req.query, environ)
            admit(req, handler, self.caller_of)
            response = handler(req)
        except AwsError as err:
            response = self._error(err, environ, request_id)
        except Exception:
            log.exception("S3 internal error")
            response = self._error(S3Error("InternalError", "We encountered an internal error. Please try again.",
                                           500), environ, request_id)
        headers = response.headers + STORED_CONTENT_HEADERS + [("x-amz-request-id", request_id),
                                                               ("x-amz-id-2", host_id)]
        if req is not None and not req.framed.finished and not self._drain(req):
            headers.append(("Connection", "close"))
        body = response.body
        if isinstance(body, bytes):
            length = response.length if response.length is not None else len(body)
            if method == "HEAD":
                body = b""
        else:
            length = response.length
        if length is not None and response.status not in (204, 304):
            headers.append(("Content-Length", str(length)))
        start_response(f"{response.status} {_STATUS_TEXT.get(response.status, 'Error')}", headers)
        return [body] if isinstance(body, bytes) else body

    def _request(self, environ: dict[str, Any], method: str) -> Request:
        try:
            path = environ.get("PATH_INFO", "/").encode("latin-1").decode("utf-8")
        except UnicodeError:
            raise S3Error("InvalidURI", "Couldn't parse the specified URI.", 400) from None
        query = {}
        for name, value in parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True):
            query.setdefault(name, value)
        bucket = virtual_host_bucket(environ)
        if bucket is not None:
            key = path[1:]
        else:
            bucket, _, key = path[1:].partition("/")
            bucket = bucket or None
        return Request(environ, method, bucket, key, query, self.objects, self.settings)

    @staticmethod
    def _drain(req: Request) -> bool:
        """Read what is left of a request body that was answered without being read (an error),
        so that the connection can carry the next request; False when it cannot be: a client
        waiting for "100 Continue" may or may not send its body now, and a large body is not
        worth reading. Such a response closes the connection instead."""
        if "100-continue" in req.environ.get("HTTP_EXPECT", "").lower() and not req.framed.started:
            return False
        return req.framed.drain(DRAIN_LIMIT)

    def error_answer(self, err: AwsError, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
        """An error in S3's shape, for a request refused before it reached S3."""
        response = self._error(err, environ, uuid.uuid4().hex[:16].upper())
        return (f"{response.status} {_STATUS_TEXT.get(response.status, 'Error')}",
                response.headers + STORED_CONTENT_HEADERS, response.body)

    def _error(self, err: AwsError, environ: dict[str, Any], request_id: str) -> Response:
        root = element(None, "Error")
        element(root, "Code", err.code)
        element(root, "Message", err.message or "")
        for name, value in getattr(err, "details", {}).items():
            element(root, name, value)
        element(root, "RequestId", request_id)
        element(root, "HostId", base64.b64encode(os.urandom(48)).decode())
        body = b"" if environ.get("REQUEST_METHOD") == "HEAD" else serialize(root)
        return Response(err.status, [("Content-Type", CONTENT_TYPE)] + list(getattr(err, "headers", [])), body)
