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
import threading
import uuid
from collections import ChainMap
from typing import Any, Callable, Iterable

import orjson

from .admin import OwnRoutes, is_loopback
from .cloudformation.lazy import LazyCloudFormation
from .config import Settings, SettingsError
from .destinations import Destinations
from .guard import Refusal, RequestGuard
from .kinesis import channel_delivery
from .kinesis.retention import Sweeper
from .kinesis.service import KinesisService
from .lazy import Lazy, LazyApp, LazyService
from .long_polls import LongPolls
from .protocol import auth, codec, eventstream, sigv4
from .protocol.body import read_bounded
from .protocol.drain import answer_unread as _answer_unread
from .protocol.errors import AwsError
from .protocol.query_app import is_query_request
from .store import Store

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
    """The composition root. Kinesis is made before the server listens: it is the data plane, and
    the first call a client makes. Every other service is made on its first use (`lazy.py`), or
    at once in the background when the data directory holds something of its that must resume
    (delivery streams, event source mappings, buckets, log groups: `_resume`)."""

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
        self.s3_root = os.path.join(os.path.dirname(self.store.path), "s3")
        self._objects = Lazy(self._make_objects)
        self.s3 = LazyApp(Lazy(self._make_s3))
        # Kinesis channels write into the same buckets through the object store's public calls.
        self.channel_delivery = channel_delivery.attach(
            self.kinesis, lambda bucket: self.objects.bucket_exists(bucket),
            lambda *args, **kwargs: self.objects.put_object(*args, **kwargs))
        # The JSON-protocol services made on first use, by their X-Amz-Target prefix (each class's
        # `target_prefix`, checked when it is made): SQS's stand-in is also `self.sqs`, which the
        # request path compares services with.
        self._lazy_services = {
            "AmazonSQS": Lazy(self._make_sqs), "Firehose_20150804": Lazy(self._make_firehose),
            "Logs_20140328": Lazy(self._make_logs), "AmazonEC2ContainerRegistry_V20150921": Lazy(self._make_ecr),
            "AmazonSSM": Lazy(self._make_ssm)}
        for prefix, lazy in self._lazy_services.items():
            self.services[prefix] = LazyService(lazy, prefix)
        self.sqs = self.services["AmazonSQS"]
        self.destinations.register("sqs", lambda *args: self.sqs.send_to_arn(*args))
        self._functions = Lazy(self._make_functions)
        # Lambda's REST API: its paths start with one of the model's API dates.
        self.lambda_rest = LazyApp(Lazy(self._make_lambda_rest), lambda environ: bool(
            _API_DATE.match(environ.get("PATH_INFO", ""))))
        self.json_signing_names = frozenset(("kinesis", "firehose", "logs", "sqs", "ecr", "ssm"))
        self._sns = Lazy(self._make_sns)
        self._sts = Lazy(self._make_sts)
        # The query-protocol services, by the name requests to them are signed for.
        self.query_apps: dict[str, Any] = {"sns": LazyApp(Lazy(self._make_sns_app)),
                                           "sts": LazyApp(Lazy(self._make_sts_app))}
        self._register_senders()
        self.channel_delivery.start()
        self.flask = OwnRoutes(self)  # kinesim's own routes; Flask and the web console on first use
        self.guard = RequestGuard(settings.host, settings.allowed_hosts, settings.cors_origins)
        self.verifier = sigv4.Verifier(_secrets(settings)) if settings.verify_signatures else None
        if self.verifier is not None:
            # The temporary credentials STS issues are accepted too, until they expire. The configured
            # ones are the ChainMap's last map, whose keys it lists first (`_own_credentials` takes one).
            self.verifier.secrets = ChainMap(self.sts.credentials, self.verifier.secrets)
        self.sweeper = Sweeper(self.kinesis, settings.retention_sweep_s)
        self.sweeper.start()
        # CloudFormation last: its engine calls the other services through this server, and
        # carries on the stack operations a restart interrupted once the server answers.
        self.cloudformation = LazyCloudFormation(self.store, self._cloudformation)
        self.query_apps["cloudformation"] = self.cloudformation
        self._resuming = threading.Thread(target=self._resume, name="kinesim-resume", daemon=True)
        self._resuming.start()

    # The services, each made on first use (see `_resume` for those made at start-up)

    @property
    def objects(self) -> Any:
        return self._objects.get()

    @property
    def functions(self) -> Any:
        return self._functions.get()

    @property
    def firehose(self) -> Any:
        return self._lazy_services["Firehose_20150804"].get()

    @property
    def logs(self) -> Any:
        return self._lazy_services["Logs_20140328"].get()

    @property
    def ecr(self) -> Any:
        return self._lazy_services["AmazonEC2ContainerRegistry_V20150921"].get()

    @property
    def ssm(self) -> Any:
        return self._lazy_services["AmazonSSM"].get()

    @property
    def sns(self) -> Any:
        return self._sns.get()

    @property
    def sts(self) -> Any:
        return self._sts.get()

    def _resume(self) -> None:
        """Make, in the background, the services that have work to carry on after a restart: the
        object store (S3 event notifications recorded before it, lifecycle rules) when there are
        buckets; Lambda (event source mapping pollers, asynchronous invocations) when there are
        functions; Firehose (delivery workers) when there are delivery streams; CloudWatch Logs
        (retention) when there are log groups. A request that needs one meanwhile waits for it."""
        try:
            if _has_buckets(self.s3_root):
                self._objects.get()
            if any(self.store.documents(kind) for kind in ("function", "mapping", "lambda-async-event")):
                self._functions.get()
            for prefix, kind in (("Firehose_20150804", "firehose-stream"), ("Logs_20140328", "logs-group")):
                if self.store.documents(kind):
                    self._lazy_services[prefix].get()
        except Exception:  # e.g. the server closed meanwhile; what was not made is made on first use
            log.exception("could not resume the services at start-up")

    def _make_objects(self) -> Any:
        from .s3.lifecycle_sweep import LifecycleSweeper
        from .s3.notifications import BucketNotifications
        from .s3.objects import ObjectStore
        objects = ObjectStore(self.s3_root, self.settings.region)
        # S3 event notifications: recorded by the object store inside each write, delivered through
        # the senders (SQS, SNS, Lambda's asynchronous invocation).
        notifications = BucketNotifications(objects.root, self.settings.account_id, self.destinations,
                                            lambda arn: self.functions.function(arn),
                                            lambda bucket: objects.bucket_info(bucket).region)
        objects.notifications = notifications
        notifications.start()  # delivers what was recorded before a restart
        # S3 lifecycle rules: expired objects deleted, stale multipart uploads aborted.
        self.lifecycle_sweeper = LifecycleSweeper(objects)
        self.lifecycle_sweeper.start()
        return objects

    def _make_s3(self) -> Any:
        from .s3.api import S3App
        return S3App(self.objects, self.settings)

    def _make_sqs(self) -> Any:
        from .sqs.service import SqsService
        return _checked(SqsService(self.settings, self.store, self.long_polls), "AmazonSQS")

    def _make_functions(self) -> Any:
        # SQS first: the pollers of SQS event source mappings resume as the Lambda service starts.
        from .functions.service import LambdaService
        functions = LambdaService(self.settings, self.store, self.kinesis, self.objects, self.destinations,
                                  queues=self.sqs.consumers)
        # Asynchronous invocations accepted before a restart resume, now that their destinations can be reached.
        functions.async_invoker.start()
        return functions

    def _make_lambda_rest(self) -> Any:
        from .protocol.rest import RestApp
        return RestApp(self.functions, payload_type="application/json")

    def _make_firehose(self) -> Any:
        from firehose.service import FirehoseService
        firehose = FirehoseService(self.settings, self.store, self.objects, self.kinesis,
                                   lambda *args: self.functions.invoke_function(*args))
        firehose.start()  # resumes delivery of what was buffered before a restart
        return _checked(firehose, "Firehose_20150804")

    def _make_logs(self) -> Any:
        # CloudWatch Logs over the same files the Lambda runtime writes functions' logs to.
        from .logs.service import LogsService
        return _checked(LogsService(self.settings, self.store, self.functions.logs), "Logs_20140328")

    def _make_ecr(self) -> Any:
        # Amazon ECR: repositories only (no registry), for the templates that declare them.
        from .ecr.service import EcrService
        return _checked(EcrService(self.settings, self.store), "AmazonEC2ContainerRegistry_V20150921")

    def _make_ssm(self) -> Any:
        # Systems Manager Parameter Store (where the CDK keeps its bootstrap version).
        from .ssm.service import SsmService
        return _checked(SsmService(self.settings, self.store), "AmazonSSM")

    def _make_sns(self) -> Any:
        from .sns.service import SnsService
        return SnsService(self.settings, self.store, self.destinations.send, self.functions.endpoint_url)

    def _make_sns_app(self) -> Any:
        from .sns.api import sns_app
        return sns_app(self.sns)

    def _make_sts(self) -> Any:
        from .sts.service import StsService
        return StsService(self.settings, self.store)

    def _make_sts_app(self) -> Any:
        from .sts.api import sts_app
        return sts_app(self.sts)

    def _cloudformation(self) -> tuple[Any, Any]:
        from .cloudformation.api import cloudformation_app
        from .cloudformation.service import CloudFormationService
        from .functions.runtimes import runnable as runnable_runtimes
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
        """Stop what was started; a service never made has nothing to stop."""
        self._resuming.join()  # nothing is being made while the rest closes
        self.sweeper.stop()
        objects = self._objects.if_made()
        if objects is not None:
            self.lifecycle_sweeper.stop()
            objects.notifications.close()
        services = {prefix: lazy.if_made() for prefix, lazy in self._lazy_services.items()}
        for made in (self._sns.if_made(), services["Firehose_20150804"]):
            if made is not None:
                made.close()
        self.channel_delivery.close()
        for made in (services["Logs_20140328"], services["AmazonSQS"], self._functions.if_made()):
            if made is not None:
                made.close()
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
        ctype = environ.get("CONTENT_TYPE", "")
        if ctype not in _BARE_TYPES:  # the SDKs send theirs bare; anything else is normalised first
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
        auth.check_environ_auth(environ, _Headers(environ))
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
        auth.check_environ_auth(environ, _Headers(environ))
        result = self.sqs.call(op, params, endpoint=_endpoint(environ))
        out, content_type = codec.encode_response(result, "json10")
        return "200 OK", [("Content-Type", content_type)], out


_UNREAD = "kinesim.body_unread"
# The first path segment of Lambda's REST API (an API date, as "/2015-03-31/functions"), and of
# nothing else the edge routes by path: requests that do not start so need no Lambda to be made.
_API_DATE = re.compile(r"/\d{4}-\d{2}-\d{2}/")


def is_s3_request(environ: dict[str, Any]) -> bool:
    """S3's routing test, imported with S3 on the first request that has no X-Amz-Target: the
    import rebinds this module's name to S3's own function, which answers every later request."""
    from .s3.api import is_s3_request as s3s_own
    globals()["is_s3_request"] = s3s_own
    return s3s_own(environ)


def _checked(service: Any, target_prefix: str) -> Any:
    """`service`, made for the stand-in routed by `target_prefix`, whose prefix it must have."""
    if service.target_prefix != target_prefix:
        raise RuntimeError(f"{type(service).__name__} answers {service.target_prefix}, not {target_prefix}")
    return service


def _has_buckets(s3_root: str) -> bool:
    """Whether the object store holds a bucket (its buckets are its root's directories whose names
    do not start with a dot: ObjectStore.list_buckets), without making it."""
    try:
        with os.scandir(s3_root) as entries:
            return any(not e.name.startswith(".") and e.is_dir() for e in entries)
    except FileNotFoundError:
        return False


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
_BARE_TYPES = frozenset((codec.JSON_CONTENT_TYPE, codec.CBOR_CONTENT_TYPE, codec.JSON10_CONTENT_TYPE))


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
