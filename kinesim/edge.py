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

The services behind it, and how each is made on first use, are `services.py`'s.
"""
from __future__ import annotations

import logging
import os
import re
from collections import ChainMap
from typing import Any, Callable, Iterable

import orjson

from .admin import OwnRoutes, is_loopback
from .config import Settings, SettingsError
from . import pool_keeper
from .guard import Refusal, RequestGuard
from .protocol import auth, codec, eventstream, sigv4, trace_header
from .protocol.body import read_bounded
from .protocol.drain import answer_unread as _answer_unread
from .protocol.errors import AwsError
from .protocol.query_app import is_query_request
from .protocol.request_ids import answer_ids, request_id
from . import scopes
from .services import Services

log = logging.getLogger("kinesim.edge")

# 10 MiB records (UpdateMaxRecordSize) arrive base64-encoded: ~13.4 MiB of JSON.
MAX_REQUEST_BYTES = 14 * 1024 * 1024
JSON_TYPES = ("application/x-amz-json-1.1",)
_NO_OPERATION = "Unable to determine service/operation name to be authorized"
_FORMAT = "kinesim.error_format"
CBOR_TYPE = "application/x-amz-cbor-1.1"


_CORS_SIMPLE_TYPES = re.compile(r"\s*(text/plain|application/x-www-form-urlencoded|multipart/form-data)\b", re.I)


def _signed_for(environ: dict[str, Any]) -> str | None:
    """The service named in the request's SigV4 credential scope, if any."""
    parts = scopes.credential(environ)
    return parts[3] if parts and len(parts) >= 4 else None


class Edge(Services):
    """The server's one WSGI app: the services (`Services`) behind the checks every request passes
    (the guard's, and --verify-signatures') and the routing to the service each request is for."""

    def __init__(self, settings: Settings):
        # --verify-signatures: the credentials to accept (a bad --credential starts nothing).
        secrets = _secrets(settings) if settings.verify_signatures else None
        super().__init__(settings, _own_credentials(secrets))
        self.json_signing_names = frozenset(("kinesis", "firehose", "logs", "sqs", "ecr", "ssm"))
        self.flask = OwnRoutes(self)  # kinesim's own routes; Flask and the web console on first use
        # While clients call, a request of its own every second (see pool_keeper); started by `serve`.
        self.keeper = pool_keeper.PoolKeeper((settings.local_host, settings.port), settings.local_authority)
        self.guard = RequestGuard(settings.host, settings.allowed_hosts, settings.cors_origins)
        # The temporary credentials STS issues are accepted too, until they expire, and IAM users'
        # Active access keys.
        self._secrets = secrets
        self.verifier = None if secrets is None else self._new_verifier()

    def reset(self, names: Iterable[str] = ()) -> tuple[str, ...]:
        """`Services.reset`; the credentials STS issued before it are no longer accepted, and kinesim's
        own routes are made again on their next use (the web console's keep services it was given)."""
        done = super().reset(names)
        self.flask.forget()
        if self.verifier is not None and "sts" in done:
            self.verifier = self._new_verifier()
        return done

    def _new_verifier(self) -> sigv4.Verifier:
        # The engines of other accounts' scopes sign with a key of their account (`scope_secrets`).
        from .iam.principals import EveryAccountsSecrets
        keys = EveryAccountsSecrets(self.principals, lambda account: self.account(account).principals)
        return sigv4.Verifier(ChainMap(self.sts.credentials, self._secrets, self.scope_secrets, keys))

    # WSGI entry point

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        app = None if "HTTP_X_AMZ_TARGET" in environ else self._route(environ)
        try:
            origin = self.guard.check(environ)
        except Refusal as refusal:
            return self._refuse(AwsError("AccessDeniedException", refusal.message, 403), environ, start_response, app)
        if app is self.keeper.answer:
            return app(environ, start_response)
        self.keeper.arrived()
        if origin is not None:
            if self.guard.is_preflight(environ):
                return self.guard.preflight(environ, origin, start_response, request_id())
            start_response = self.guard.with_cors(origin, start_response)
        if self.verifier is not None:
            refused = self._verify(environ, app)
            if refused is not None:
                return self._refuse(refused, environ, start_response, app)
        if app is None:  # the JSON protocols find the request's scope as they dispatch it
            return self.json_protocol(environ, start_response)
        self.resolve(environ)  # the request's account and region, for every service (`scopes.py`)
        if app is self.lambda_rest or app is self.query_apps["sns"]:
            try:  # another account's function or topic: served by its owner if its policy allows
                if app is self.lambda_rest:
                    self.cross_account.lambda_call(environ)
                else:
                    self.cross_account.sns_call(environ)
            except AwsError as err:
                return self._refuse(err, environ, start_response, app)
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
            return self.keeper.answer if environ["PATH_INFO"] == pool_keeper.PATH else self.flask
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
        headers = headers + answer_ids() + [("Content-Length", str(len(body)))]
        return _answer_unread(environ, start_response, status_line, headers, body)

    def json_protocol(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        try:
            status, headers, body = self._dispatch(environ)
        except AwsError as err:
            status, headers, body = self._error(err, environ)
        except Exception:
            log.exception("internal error")
            status, headers, body = self._error(AwsError("InternalFailure", None, 500), environ)
        headers += answer_ids()
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
        service = self.scope_of(environ).services.get(prefix)
        known = service is not None and service.has_operation(op)
        ctype = environ.get("CONTENT_TYPE", "")
        if ctype not in _BARE_TYPES:  # the SDKs send theirs bare; anything else is normalised first
            ctype = self._content_type(environ)
        if prefix == "AmazonSQS" and ctype in _SQS_TYPES:
            return self._sqs_call(service, environ, body, op, known)
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
        service = self.cross_account.json_service(environ, prefix, op, params, service)
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

    def _sqs_call(self, sqs: Any, environ: dict[str, Any], body: bytes, op: str, known: bool) -> tuple[str, list, Any]:
        """SQS: JSON 1.0 (its protocol; 1.1 bodies are the same and are taken too), answered in
        1.0, errors with their query codes. Queue URLs name the endpoint the request came in on; the
        messages it sends keep its X-Amzn-Trace-Id as their AWSTraceHeader."""
        environ[_FORMAT] = "json10"
        if not known:
            raise AwsError("UnknownOperationException")
        params, _ = codec.decode_request(body or b"{}", codec.JSON_CONTENT_TYPE)
        auth.check_environ_auth(environ, _Headers(environ))
        sqs = self.cross_account.json_service(environ, "AmazonSQS", op, params, sqs)
        result = sqs.call(op, params, endpoint=_endpoint(environ),
                               trace_header=trace_header.from_environ(environ))
        out, content_type = codec.encode_response(result, "json10")
        return "200 OK", [("Content-Type", content_type)], out


_UNREAD = "kinesim.body_unread"


def is_s3_request(environ: dict[str, Any]) -> bool:
    """S3's routing test, imported with S3 on the first request that has no X-Amz-Target: the
    import rebinds this module's name to S3's own function, which answers every later request."""
    from .s3.api import is_s3_request as s3s_own
    globals()["is_s3_request"] = s3s_own
    return s3s_own(environ)


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


def _own_credentials(secrets: dict[str, str] | None) -> dict[str, str]:
    """The credentials this server's own clients sign with (CloudFormation's engine): one it
    accepts under --verify-signatures, else any."""
    if secrets is not None:
        key_id, secret = next(iter(secrets.items()))
        return {"aws_access_key_id": key_id, "aws_secret_access_key": secret}
    return {"aws_access_key_id": "kinesim", "aws_secret_access_key": "kinesim"}


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
