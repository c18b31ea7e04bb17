"""The edge: one WSGI app on one port, routing each request to its service.

- JSON-protocol calls (an `X-Amz-Target` header: Kinesis, Firehose) take a lean path straight to
  the service: it is the data plane's hot path and Flask's per-request machinery would double its
  cost. It is checked first for the same reason.
- Lambda's REST-JSON API: paths under the model's date prefixes (`/2015-03-31/functions/...`).
- S3's REST-XML API: virtual-host style (`Host: bucket.localhost`) or path style.
- kinesim's own routes (`/_kinesim/...`: health, logs, stacks, metrics): the Flask app of `admin.py`.

Before any service sees a request, `guard.py` checks its Host and Origin (and answers CORS for
allowed origins) and, with `--verify-signatures`, `protocol/sigv4.py` checks its signature.
A request refused, or answered with an error before its body was read, still has its body read
afterwards (`protocol/drain.py`), so that clients which write first see the answer, not a reset.
"""
from __future__ import annotations

import base64
import itertools
import logging
import os
import re
import uuid
from collections import ChainMap
from typing import Any, Callable, Iterable

import orjson

from firehose.service import FirehoseService

from .admin import admin_app, is_loopback
from .cloudformation.lazy import LazyCloudFormation
from .config import Settings, SettingsError
from .destinations import Destinations
from .ecr.service import EcrService
from .functions.runtimes import runnable as runnable_runtimes
from .functions.service import LambdaService
from .guard import Refusal, RequestGuard
from .kinesis import channel_delivery
from .kinesis.retention import Sweeper
from .kinesis.service import KinesisService
from .logs.service import LogsService
from .long_polls import LongPolls
from .protocol import auth, codec, eventstream, sigv4
from .protocol.body import read_bounded
from .protocol.drain import answer_unread as _answer_unread
from .protocol.errors import AwsError
from .protocol.rest import RestApp
from .s3.api import S3App, is_s3_request
from .s3.lifecycle_sweep import LifecycleSweeper
from .s3.notifications import BucketNotifications
from .s3.objects import ObjectStore
from .protocol.query_app import is_query_request
from .sns.api import sns_app
from .sns.service import SnsService
from .sqs.service import SqsService
from .ssm.service import SsmService
from .store import Store
from .sts.api import sts_app
from .sts.service import StsService

log = logging.getLogger("kinesim.edge")

# 10 MiB records (UpdateMaxRecordSize) arrive base64-encoded: ~13.4 MiB of JSON.
MAX_REQUEST_BYTES = 14 * 1024 * 1024
JSON_TYPES = ("application/x-amz-json-1.1",)
_NO_OPERATION = "Unable to determine service/operation name to be authorized"
_FORMAT = "kinesim.error_format"
CBOR_TYPE = "application/x-amz-cbor-1.1"


_CORS_SIMPLE_TYPES = re.compile(r"\s*(text/plain|application/x-www-form-urlencoded|multipart/form-data)\b", re.I)
_REQUEST_ID_PREFIX = str(uuid.uuid4())[:24]
_request_counter = itertools.count(1)


# x-amz-id-2: 72 bytes in base64, as AWS's (and kinesalite's recordings): 66 random bytes per
# process, then the request counter.
_ID2_PREFIX = base64.b64encode(os.urandom(66)).decode()


def request_id() -> str:
    """A UUID-shaped request id: a random per-process prefix and a counter (uuid4 per call costs
    more than the rest of a PutRecord's bookkeeping)."""
    return f"{_REQUEST_ID_PREFIX}{next(_request_counter) & 0xFFFFFFFFFFFF:012x}"


def _ids() -> list[tuple[str, str]]:
    """The two ids every answer of AWS's JSON services carries. The counter's 8 hex digits are
    base64 characters too: x-amz-id-2 stays 96 characters of base64 (72 bytes)."""
    n = next(_request_counter) & 0xFFFFFFFFFFFF
    return [("x-amzn-RequestId", f"{_REQUEST_ID_PREFIX}{n:012x}"), ("x-amz-id-2", f"{_ID2_PREFIX}{n & 0xFFFFFFFF:08x}")]


def _signed_for(environ: dict[str, Any]) -> str | None:
    """The service named in the request's SigV4 credential scope, if any."""
    authorization = environ.get("HTTP_AUTHORIZATION")
    scope = auth.credential_scope({"authorization": authorization}, environ.get("QUERY_STRING", "")) \
        if authorization or "X-Amz-Credential" in environ.get("QUERY_STRING", "") else None
    return scope[3] if scope and len(scope) >= 4 else None


class Edge:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.store = Store(None if settings.in_memory else settings.data_dir)
        # In-process deliveries between services by ARN (OnFailure destinations, SNS subscriptions):
        # each receiving service registers its sender here.
        self.destinations = Destinations()
        # One cap for the long polls of every service: each holds a request thread while it waits.
        self.long_polls = LongPolls(settings.max_long_polls)
        self.kinesis = KinesisService(settings, self.store, self.long_polls)
        self.services: dict[str, Any] = {self.kinesis.target_prefix: self.kinesis}
        # Buckets live beside the database (the S3 API serves the same store).
        self.objects = ObjectStore(os.path.join(os.path.dirname(self.store.path), "s3"), settings.region)
        self.s3 = S3App(self.objects, settings)
        # Kinesis channels write into the same buckets through the object store's public calls.
        self.channel_delivery = channel_delivery.attach(self.kinesis, self.objects.bucket_exists,
                                                        self.objects.put_object)
        # SQS before Lambda: the pollers of SQS event source mappings resume as the Lambda service starts.
        self.sqs = SqsService(settings, self.store, self.long_polls)
        self.services[self.sqs.target_prefix] = self.sqs
        self.destinations.register("sqs", self.sqs.send_to_arn)
        self.functions = LambdaService(settings, self.store, self.kinesis, self.objects, self.destinations,
                                       queues=self.sqs.consumers)
        self.lambda_rest = RestApp(self.functions, payload_type="application/json")
        self.firehose = FirehoseService(settings, self.store, self.objects, self.kinesis,
                                        self.functions.invoke_function)
        self.services[self.firehose.target_prefix] = self.firehose
        # CloudWatch Logs over the same files the Lambda runtime writes functions' logs to.
        self.logs = LogsService(settings, self.store, self.functions.logs)
        self.services[self.logs.target_prefix] = self.logs
        # Amazon ECR: repositories only (no registry), for the templates that declare them.
        self.ecr = EcrService(settings, self.store)
        self.services[self.ecr.target_prefix] = self.ecr
        # Systems Manager Parameter Store (where the CDK keeps its bootstrap version).
        self.ssm = SsmService(settings, self.store)
        self.services[self.ssm.target_prefix] = self.ssm
        self.json_signing_names = frozenset(("kinesis", "firehose", "logs", "sqs", "ecr", "ssm"))
        self.sns = SnsService(settings, self.store, self.destinations.send, self.functions.endpoint_url)
        # The query-protocol services, by the name requests to them are signed for.
        self.query_apps: dict[str, Any] = {"sns": sns_app(self.sns)}
        self.sts = StsService(settings, self.store)
        self.query_apps["sts"] = sts_app(self.sts)
        self._register_senders()
        # Asynchronous invocations accepted before a restart resume, now that their destinations can be reached.
        self.functions.async_invoker.start()
        # S3 event notifications: recorded by the object store inside each write, delivered through
        # the senders above (SQS, SNS, Lambda's asynchronous invocation).
        self.s3_notifications = BucketNotifications(self.objects.root, settings.account_id, self.destinations,
                                                    self.functions.function,
                                                    lambda bucket: self.objects.bucket_info(bucket).region)
        self.objects.notifications = self.s3_notifications
        self.s3_notifications.start()  # delivers what was recorded before a restart
        self.firehose.start()  # resumes delivery of what was buffered before a restart
        self.channel_delivery.start()
        self.flask = admin_app(self)
        self.guard = RequestGuard(settings.host, settings.allowed_hosts, settings.cors_origins)
        self.verifier = sigv4.Verifier(_secrets(settings)) if settings.verify_signatures else None
        if self.verifier is not None:
            # The temporary credentials STS issues are accepted too, until they expire. The configured
            # ones are the ChainMap's last map, whose keys it lists first (`_own_credentials` takes one).
            self.verifier.secrets = ChainMap(self.sts.credentials, self.verifier.secrets)
        self.sweeper = Sweeper(self.kinesis, settings.retention_sweep_s)
        self.sweeper.start()
        # S3 lifecycle rules: expired objects deleted, stale multipart uploads aborted.
        self.lifecycle_sweeper = LifecycleSweeper(self.objects)
        self.lifecycle_sweeper.start()
        # CloudFormation last: its engine calls the other services through this server, and
        # carries on the stack operations a restart interrupted once the server answers.
        self.cloudformation = LazyCloudFormation(self.store, self._cloudformation)
        self.query_apps["cloudformation"] = self.cloudformation

    def _cloudformation(self) -> tuple[Any, Any]:
        from .cloudformation.api import cloudformation_app
        from .cloudformation.service import CloudFormationService
        service = CloudFormationService(self.settings, self.store, self._read_object,
                                        lambda: self.functions.endpoint_url, self._own_credentials(), runnable_runtimes)
        return service, cloudformation_app(service)

    def _read_object(self, bucket: str, key: str) -> bytes:
        """An object's bytes (CloudFormation's TemplateURL): S3's errors as AwsError."""
        handle, _ = self.objects.open_object(bucket, key)
        with handle:
            return handle.read()

    def _own_credentials(self) -> dict[str, str]:
        """The credentials this server's own clients sign with (CloudFormation's engine): one it
        accepts under --verify-signatures, else any."""
        if self.verifier is not None:
            key_id, secret = next(iter(self.verifier.secrets.items()))
            return {"aws_access_key_id": key_id, "aws_secret_access_key": secret}
        return {"aws_access_key_id": "kinesim", "aws_secret_access_key": "kinesim"}

    def _register_senders(self) -> None:
        """The in-process deliveries by ARN that SNS subscriptions and OnFailure destinations use:
        to an SNS topic (a Publish), a Lambda function (an asynchronous invocation: the function is
        looked up first, so that a missing one is the sender's error) and a Firehose delivery
        stream (a PutRecord through Firehose's own checks)."""
        def to_lambda(arn: str, message: bytes, attributes: Any) -> None:
            self.functions.function(arn)
            self.functions.async_invoker.submit(arn, message, request_id())

        def to_firehose(arn: str, message: bytes, attributes: Any) -> None:
            name = arn.split(":", 5)[5].partition("/")[2]
            self.firehose.call("PutRecord", {"DeliveryStreamName": name, "Record": {"Data": message}}, cbor=True)

        def to_sns(arn: str, message: bytes, attributes: Any) -> None:
            self.sns.call("Publish", {"TopicArn": arn, "Message": message.decode("utf-8", "replace"),
                                      **(attributes or {})})

        self.destinations.register("lambda", to_lambda)
        self.destinations.register("firehose", to_firehose)
        self.destinations.register("sns", to_sns)

    def close(self) -> None:
        self.sweeper.stop()
        self.lifecycle_sweeper.stop()
        self.s3_notifications.close()
        self.sns.close()
        self.firehose.close()
        self.channel_delivery.close()
        self.logs.close()
        self.sqs.close()
        self.functions.close()
        self.kinesis.close()
        self.store.close()

    # WSGI entry point

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        app = None if "HTTP_X_AMZ_TARGET" in environ else self._route(environ)
        try:
            origin = self.guard.check(environ)
        except Refusal as refusal:
            return self._refuse(AwsError("AccessDeniedException", refusal.message, 403), environ, start_response, app)
        if origin is not None:
            if self.guard.is_preflight(environ):
                return self.guard.preflight(environ, origin, start_response, request_id())
            start_response = self.guard.with_cors(origin, start_response)
        if self.verifier is not None:
            refused = self._verify(environ, app)
            if refused is not None:
                return self._refuse(refused, environ, start_response, app)
        if app is None:
            return self.json_protocol(environ, start_response)
        # SNS's query protocol is a form POST from every SDK, so it cannot be told from a web page's
        # by its type: the guard's Origin check above is what keeps pages of other sites out.
        if app is not self.flask and not self._is_query_app(app) and environ.get("REQUEST_METHOD") == "POST" \
                and _CORS_SIMPLE_TYPES.match(environ.get("CONTENT_TYPE", "")):
            # The body types a web page may send anywhere without asking first. No AWS SDK sends
            # them to Lambda or to S3's POST operations (their bodies are JSON or XML, or a blob
            # without a type), so a call that carries one is refused rather than run.
            err = AwsError("UnsupportedMediaTypeException",
                           f"Content-Type {environ['CONTENT_TYPE']!r} is not one this API takes.", 415)
            return self._refuse(err, environ, start_response, app)
        return app(environ, start_response)

    def _route(self, environ: dict[str, Any]) -> Any:
        """The app for a request without `X-Amz-Target` (None: the JSON protocols' own answers).
        What the request is signed for decides first: a GET signed for Kinesis gets Kinesis's
        answer, not a page of kinesim's own."""
        if self.lambda_rest.accepts(environ):
            return self.lambda_rest
        signed_for = _signed_for(environ)
        if signed_for in self.query_apps:
            return self.query_apps[signed_for]
        if signed_for is None and is_query_request(environ):
            # Unsigned, it is refused by the service for want of a signature, except SNS's
            # Unsubscribe link (a GET): SNS's shape is the one to answer in.
            return self.query_apps["sns"]
        if is_s3_request(environ):
            return self.s3
        if environ.get("PATH_INFO", "").startswith("/_kinesim/"):
            return self.flask
        if environ.get("REQUEST_METHOD") == "POST" or signed_for in self.json_signing_names:
            return None
        return self.flask

    def _is_query_app(self, app: Any) -> bool:
        return any(app is query_app for query_app in self.query_apps.values())

    def _verify(self, environ: dict[str, Any], app: Any) -> AwsError | None:
        """--verify-signatures: AWS's answer to a request not signed with a configured secret.
        kinesim's own routes have no signature to check: only this machine may use them (its
        command-line tools do), and anyone may ask whether the server is up."""
        if app is self.flask:
            if environ.get("PATH_INFO") == "/_kinesim/health" or is_loopback(environ.get("REMOTE_ADDR")):
                return None
            return AwsError("AccessDeniedException", "kinesim's own routes answer this machine only when "
                                                     "--verify-signatures is on", 403)
        family = "json" if app is None else "s3" if app is self.s3 else "lambda"
        return sigv4.verify_request(self.verifier, environ, family)

    def _refuse(self, err: AwsError, environ: dict[str, Any], start_response: Callable,
                app: Any = None) -> Iterable[bytes]:
        """Answer a request the server will not serve, before any service sees it (in the shape of
        the service it was meant for, when known)."""
        log.warning("refused %s %s: %s", environ.get("REQUEST_METHOD"), environ.get("PATH_INFO"), err.message)
        if app is self.s3 and err.code in ("AccessDeniedException", "UnsupportedMediaTypeException"):
            err = AwsError("AccessDenied", err.message, 403)  # S3's one code for a refused request
        if app is self.lambda_rest or app is self.s3 or self._is_query_app(app):
            status_line, headers, body = app.error_answer(err, environ)
        else:
            status_line, headers, body = self._error(err, environ)
        headers = headers + _ids() + [("Content-Length", str(len(body)))]
        return _answer_unread(environ, start_response, status_line, headers, body)

    def json_protocol(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        try:
            status, headers, body = self._dispatch(environ)
        except AwsError as err:
            status, headers, body = self._error(err, environ)
        except Exception:
            log.exception("internal error")
            status, headers, body = self._error(AwsError("InternalFailure", None, 500), environ)
        headers += _ids()
        if isinstance(body, eventstream.EncodedEvents):
            start_response(status, headers + [("Content-Type", eventstream.EVENTSTREAM_CONTENT_TYPE)])
            return body
        headers.append(("Content-Length", str(len(body))))
        if environ.get(_UNREAD):
            return _answer_unread(environ, start_response, status, headers, body)
        start_response(status, headers)
        return [body]

    @staticmethod
    def _content_type(environ: dict[str, Any]) -> str:
        return environ.get("CONTENT_TYPE", "").split(";")[0].strip().lower()

    def _error(self, err: AwsError, environ: dict[str, Any]) -> tuple[str, list, bytes]:
        fmt = environ.get(_FORMAT)
        if fmt is None:
            ctype = self._content_type(environ)
            fmt = "cbor" if ctype == CBOR_TYPE else "json" if ctype in JSON_TYPES else "xml"
        status, headers, body = codec.encode_error(err, fmt)
        return _status_line(status), list(headers.items()), body

    def _dispatch(self, environ: dict[str, Any]) -> tuple[str, list, Any]:
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            raise AwsError("SerializationException", "Invalid Content-Length header") from None
        body = read_bounded(environ, length, MAX_REQUEST_BYTES)
        if body is None:
            raise _too_large(environ)
        # The order of AWS's checks, as kinesalite recorded them from Kinesis: method, empty body,
        # content type, body, target, credentials.
        if environ.get("REQUEST_METHOD") != "POST":
            raise _answered_as("xml", AwsError("AccessDeniedException", _NO_OPERATION, 403), environ)
        prefix, _, op = environ.get("HTTP_X_AMZ_TARGET", "").partition(".")
        service = self.services.get(prefix)
        known = service is not None and service.has_operation(op)
        ctype = self._content_type(environ)
        if service is self.sqs and ctype in _SQS_TYPES:
            return self._sqs_call(environ, body, op, known)
        if not body:  # answered in CBOR unless the request says JSON 1.1, whatever else it says
            raise _answered_as("json" if ctype == codec.JSON_CONTENT_TYPE else "cbor",
                               AwsError("SerializationException" if known else "UnknownOperationException"), environ)
        if ctype == "application/json":
            # AWS's front end answers plain JSON in the envelope of its old Coral protocol.
            raise _answered_as("coral", AwsError("UnknownOperationException", None, 404) if _is_json(body)
                               else AwsError("SerializationException"), environ)
        if ctype not in JSON_TYPES and ctype != CBOR_TYPE:
            if not prefix or not op:
                raise AwsError("AccessDeniedException", _NO_OPERATION, 403)
            raise AwsError("UnknownOperationException", None, 404)
        params, fmt = codec.decode_request(body, ctype)
        if not known:
            raise AwsError("UnknownOperationException")
        auth.check_auth("POST", _Headers(environ), environ.get("QUERY_STRING", ""))
        result = service.call(op, params, cbor=fmt == "cbor")
        timestamps = service.validator.output_timestamp_members(op) if fmt == "cbor" else frozenset()
        if isinstance(result, eventstream.EventStream):
            # Each event's payload in the request's protocol: CBOR for the Java SDK and the KCL.
            return "200 OK", [], result.encoded(lambda body: codec.encode_response(body, fmt, timestamps)[0],
                                                codec.response_type(fmt))
        if not service.validator.has_output(op):  # AWS sends no body at all, not `{}`
            return "200 OK", [("Content-Type", codec.response_type(fmt))], b""
        out, content_type = codec.encode_response(result, fmt, timestamps)
        return "200 OK", [("Content-Type", content_type)], out

    def _sqs_call(self, environ: dict[str, Any], body: bytes, op: str, known: bool) -> tuple[str, list, Any]:
        """SQS: JSON 1.0 (its protocol; 1.1 bodies are the same and are taken too), answered in
        1.0, errors with their query codes. Queue URLs name the endpoint the request came in on."""
        environ[_FORMAT] = "json10"
        if not known:
            raise AwsError("UnknownOperationException")
        params, _ = codec.decode_request(body or b"{}", codec.JSON_CONTENT_TYPE)
        auth.check_auth("POST", _Headers(environ), environ.get("QUERY_STRING", ""))
        result = self.sqs.call(op, params, endpoint=_endpoint(environ))
        out, content_type = codec.encode_response(result, "json10")
        return "200 OK", [("Content-Type", content_type)], out


_UNREAD = "kinesim.body_unread"


def _secrets(settings: Settings) -> dict[str, str]:
    """The credentials --verify-signatures accepts: --credential, else kinesim's own AWS environment."""
    try:
        secrets = sigv4.parse_credentials(settings.credentials)
    except ValueError as err:
        raise SettingsError(f"--credential: {err}") from None
    if not secrets and os.environ.get("AWS_ACCESS_KEY_ID") and os.environ.get("AWS_SECRET_ACCESS_KEY"):
        secrets[os.environ["AWS_ACCESS_KEY_ID"]] = os.environ["AWS_SECRET_ACCESS_KEY"]
    if not secrets:
        raise SettingsError("--verify-signatures needs the credentials to accept: --credential KEY_ID:SECRET, "
                            "or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in kinesim's environment")
    return secrets


def _answered_as(fmt: str, err: AwsError, environ: dict[str, Any]) -> AwsError:
    """`err`, to be answered in `fmt` whatever the request's content type says."""
    environ[_FORMAT] = fmt
    return err


_SQS_TYPES = (codec.JSON10_CONTENT_TYPE, codec.JSON_CONTENT_TYPE)


def _endpoint(environ: dict[str, Any]) -> str:
    """`scheme://host[:port]` as the client reached the server (the guard has checked the Host)."""
    host = environ.get("HTTP_HOST") or f"{environ.get('SERVER_NAME', 'localhost')}:{environ.get('SERVER_PORT', '')}"
    return f"{environ.get('wsgi.url_scheme', 'http')}://{host}"


def _is_json(body: bytes) -> bool:
    try:
        orjson.loads(body)
        return True
    except orjson.JSONDecodeError:
        return False


def _too_large(environ: dict[str, Any]) -> AwsError:
    environ[_UNREAD] = True
    return AwsError("SerializationException", f"Request must be smaller than {MAX_REQUEST_BYTES} bytes", 413)


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
