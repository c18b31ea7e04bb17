"""The edge: one WSGI app on one port, routing each request to its service.

- JSON-protocol calls (an `X-Amz-Target` header: Kinesis, Firehose) take a lean path straight to
  the service: it is the data plane's hot path and Flask's per-request machinery would double its
  cost. It is checked first for the same reason.
- Lambda's REST-JSON API: paths under the model's date prefixes (`/2015-03-31/functions/...`).
- S3's REST-XML API: virtual-host style (`Host: bucket.localhost`) or path style.
- kinesim's own routes (`/_kinesim/...`: health, logs, stacks, metrics): the Flask app.
"""
from __future__ import annotations

import itertools
import logging
import os
import re
import uuid
from typing import Any, Callable, Iterable

from flask import Flask, abort, jsonify, request, send_file

from firehose.service import FirehoseService

from .config import Settings
from .functions.service import LambdaService
from .kinesis.retention import Sweeper
from .kinesis.service import KinesisService
from .protocol import auth, codec
from .protocol.errors import AwsError
from .protocol.rest import RestApp
from .s3.api import S3App, is_s3_request
from .s3.objects import ObjectStore
from .store import Store

log = logging.getLogger("kinesim.edge")
_FUNCTION_NAME = re.compile(r"[a-zA-Z0-9-_]{1,64}")

# 10 MiB records (UpdateMaxRecordSize) arrive base64-encoded: ~13.4 MiB of JSON.
MAX_REQUEST_BYTES = 14 * 1024 * 1024
JSON_TYPES = ("application/x-amz-json-1.1", "application/json")
CBOR_TYPE = "application/x-amz-cbor-1.1"


_REQUEST_ID_PREFIX = str(uuid.uuid4())[:24]
_request_counter = itertools.count(1)


def request_id() -> str:
    """A UUID-shaped request id: a random per-process prefix and a counter (uuid4 per call costs
    more than the rest of a PutRecord's bookkeeping)."""
    return f"{_REQUEST_ID_PREFIX}{next(_request_counter) & 0xFFFFFFFFFFFF:012x}"


class StreamingResponse:
    """An operation's answer that is a stream of bytes (SubscribeToShard's event stream)."""

    def __init__(self, chunks: Iterable[bytes], content_type: str = "application/vnd.amazon.eventstream"):
        self.chunks, self.content_type = chunks, content_type


class Edge:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.store = Store(None if settings.in_memory else settings.data_dir)
        self.kinesis = KinesisService(settings, self.store)
        self.services: dict[str, Any] = {self.kinesis.target_prefix: self.kinesis}
        # Buckets live beside the database (the S3 API serves the same store).
        self.objects = ObjectStore(os.path.join(os.path.dirname(self.store.path), "s3"), settings.region)
        self.s3 = S3App(self.objects, settings)
        self.functions = LambdaService(settings, self.store, self.kinesis, self.objects)
        self.lambda_rest = RestApp(self.functions, payload_type="application/json")
        self.firehose = FirehoseService(settings, self.store, self.objects, self.kinesis,
                                        self.functions.invoke_function)
        self.services[self.firehose.target_prefix] = self.firehose
        self.firehose.start()  # resumes delivery of what was buffered before a restart
        self.flask = self._flask_app()
        self.sweeper = Sweeper(self.kinesis, settings.retention_sweep_s)
        self.sweeper.start()

    def close(self) -> None:
        self.sweeper.stop()
        self.firehose.close()
        self.functions.close()
        self.store.close()

    def _flask_app(self) -> Flask:
        app = Flask("kinesim")

        # A delivery stream's delivery metrics (CloudWatch's DeliveryToS3.* and friends).
        @app.get("/_kinesim/firehose/<name>/metrics")
        def firehose_metrics(name: str):
            found = self.firehose.deliveries.metrics(name)
            if found is None:
                return jsonify(message=f"Firehose {name} under account {self.settings.account_id} not found."), 404
            return jsonify(found)

        @app.get("/_kinesim/health")
        def health():
            return jsonify(status="running",
                           services={name: "running" for name in ("kinesis", "lambda", "firehose", "s3")},
                           data_dir=None if self.settings.in_memory else self.settings.data_dir,
                           # Where buckets are plain directories (a temp one when in memory): `kinesim sql`
                           # reads delivered objects from here.
                           s3_root=self.objects.root,
                           region=self.settings.region, account_id=self.settings.account_id)

        # Deployed stacks' state (`kinesim deploy`): what each template created, kept with the data
        # so that a redeploy against this server updates in place and `--delete` knows what to remove.
        @app.get("/_kinesim/stacks/<name>")
        def get_stack(name: str):
            stack = self.store.document("stack", name)
            return (jsonify(stack), 200) if stack is not None else (jsonify(message=f"Stack {name} does not exist"), 404)

        @app.put("/_kinesim/stacks/<name>")
        def put_stack(name: str):
            body = request.get_json(silent=True)
            if not isinstance(body, dict):
                return jsonify(message="A stack is a JSON object"), 400
            self.store.put_document("stack", name, body)
            return jsonify(body)

        @app.delete("/_kinesim/stacks/<name>")
        def delete_stack(name: str):
            self.store.delete_document("stack", name)
            return "", 204

        # A function's log events (`kinesim logs`): ?since=<epoch ms>, oldest first.
        @app.get("/_kinesim/logs/<function>")
        def function_logs(function: str):
            if not _FUNCTION_NAME.fullmatch(function):
                return jsonify(message=f"{function!r} is not a function name"), 400
            try:
                since = int(request.args.get("since", "0"))
                limit = int(request.args.get("limit", "10000"))
            except ValueError:
                return jsonify(message="since and limit are integers (epoch milliseconds, a count)"), 400
            return jsonify(logGroupName=self.functions.logs.group_name(function),
                           events=self.functions.logs.read(function, since, max(1, min(limit, 10000))))

        # GetFunction's Code.Location: the deployment package as uploaded.
        @app.get("/_kinesim/functions/<function>/code.zip")
        def function_code(function: str):
            fn = self.functions.functions.get(function)
            path = fn and self.functions.code.package_path(function, fn.get("PackageId", ""))
            if not path:
                abort(404)
            return send_file(path, mimetype="application/zip", download_name=f"{function}.zip")

        return app

    # WSGI entry point

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        if "HTTP_X_AMZ_TARGET" in environ:
            return self.json_protocol(environ, start_response)
        if self.lambda_rest.accepts(environ):
            return self.lambda_rest(environ, start_response)
        if is_s3_request(environ):
            return self.s3(environ, start_response)
        if environ.get("REQUEST_METHOD") != "POST":
            return self.flask(environ, start_response)
        return self.json_protocol(environ, start_response)

    def json_protocol(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        try:
            status, headers, body = self._dispatch(environ)
        except AwsError as err:
            status, headers, body = self._error(err, environ)
        except Exception:
            log.exception("internal error")
            status, headers, body = self._error(AwsError("InternalFailure", None, 500), environ)
        headers.append(("x-amzn-RequestId", request_id()))
        if isinstance(body, StreamingResponse):
            start_response(status, headers + [("Content-Type", body.content_type)])
            return body.chunks
        headers.append(("Content-Length", str(len(body))))
        start_response(status, headers)
        return [body]

    @staticmethod
    def _content_type(environ: dict[str, Any]) -> str:
        return environ.get("CONTENT_TYPE", "").split(";")[0].strip().lower()

    def _error(self, err: AwsError, environ: dict[str, Any]) -> tuple[str, list, bytes]:
        ctype = self._content_type(environ)
        fmt = "cbor" if ctype == CBOR_TYPE else "json" if ctype in JSON_TYPES else "xml"
        status, headers, body = codec.encode_error(err, fmt)
        return _status_line(status), list(headers.items()), body

    def _dispatch(self, environ: dict[str, Any]) -> tuple[str, list, Any]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        if length > MAX_REQUEST_BYTES:
            raise AwsError("SerializationException", f"Request must be smaller than {MAX_REQUEST_BYTES} bytes", 413)
        body = environ["wsgi.input"].read(length) if length else environ["wsgi.input"].read()
        if len(body) > MAX_REQUEST_BYTES:
            raise AwsError("SerializationException", f"Request must be smaller than {MAX_REQUEST_BYTES} bytes", 413)
        if environ.get("REQUEST_METHOD") != "POST":
            raise AwsError("AccessDeniedException", "Unable to determine service/operation name to be authorized", 403)
        prefix, _, op = environ.get("HTTP_X_AMZ_TARGET", "").partition(".")
        service = self.services.get(prefix)
        known = service is not None and service.has_operation(op)
        ctype = self._content_type(environ)
        if ctype not in JSON_TYPES and ctype != CBOR_TYPE:
            if not prefix or not op:
                raise AwsError("AccessDeniedException",
                               "Unable to determine service/operation name to be authorized", 403)
            raise AwsError("UnknownOperationException", None, 404)
        if not body.strip():
            raise AwsError("SerializationException" if known else "UnknownOperationException")
        params, fmt = codec.decode_request(body, ctype)
        if not known:
            raise AwsError("UnknownOperationException")
        auth.check_auth("POST", _Headers(environ), environ.get("QUERY_STRING", ""))
        result = service.call(op, params, cbor=fmt == "cbor")
        if isinstance(result, StreamingResponse):
            return "200 OK", [], result
        out, content_type = codec.encode_response(
            result, fmt, service.validator.output_timestamp_members(op) if fmt == "cbor" else frozenset())
        return "200 OK", [("Content-Type", content_type)], out


class _Headers:
    """A WSGI environ's HTTP headers looked up by name, any case, without copying them."""

    __slots__ = ("environ",)

    def __init__(self, environ: dict[str, Any]):
        self.environ = environ

    @staticmethod
    def _key(name: str) -> str:
        key = name.upper().replace("-", "_")
        return key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else "HTTP_" + key

    def get(self, name: str, default: Any = None) -> Any:
        return self.environ.get(self._key(name), default)

    def __getitem__(self, name: str) -> Any:
        return self.environ[self._key(name)]

    def __contains__(self, name: object) -> bool:
        return self._key(str(name)) in self.environ


_REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 413: "Request Entity Too Large",
            500: "Internal Server Error", 503: "Service Unavailable"}


def _status_line(status: int) -> str:
    return f"{status} {_REASONS.get(status, 'Error')}"
