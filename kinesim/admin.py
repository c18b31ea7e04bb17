"""kinesim's own routes (`/_kinesim/...`), for its command-line tools and tests: health (with the
account and region pairs in use), a reset of the services' state, stack state for `kinesim deploy`,
function logs and code, Firehose delivery metrics, the web console, and which modules the server
has loaded.

They are a Flask app, made (Flask, the console and all) on the first request to one of them:
a server that is only asked AWS calls never loads Flask. `/_kinesim/modules` is answered
without it."""
from __future__ import annotations

import ipaddress
import os
import re
import sys
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable
from urllib.parse import parse_qs

import orjson

from .lazy import Lazy

if TYPE_CHECKING:
    from flask import Flask

    from .edge import Edge

_FUNCTION_NAME = re.compile(r"[a-zA-Z0-9-_]{1,64}")


def is_loopback(address: str | None) -> bool:
    try:
        return address is not None and ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


class OwnRoutes:
    """The WSGI app of `/_kinesim/...` (and of the pages the edge gives no service)."""

    def __init__(self, edge: "Edge"):
        self.edge = edge
        self.app = Lazy(lambda: admin_app(edge))

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        path = environ.get("PATH_INFO")
        if path == "/_kinesim/modules":
            return loaded_modules(environ, start_response)
        if path == "/_kinesim/reset":
            return reset(self.edge, environ, start_response)
        return self.app.get()(environ, start_response)

    def forget(self) -> None:
        """Make the Flask app again on its next use (after a reset), so that nothing its routes
        were made with outlives the services a reset makes anew."""
        self.app.forget()

    def __getattr__(self, name: str) -> Any:  # the Flask app's own (test_client, url_map, ...)
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.app.get(), name)


def loaded_modules(environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
    """GET /_kinesim/modules: the top-level names of the modules this server process has
    imported (`{"modules": ["base64", "firehose", ...]}`), to check what a server loads before
    it is asked for it (tests/test_startup_imports.py). This machine only: it says what runs here."""
    if not is_loopback(environ.get("REMOTE_ADDR")):
        status, doc = "403 Forbidden", {"message": "/_kinesim/modules answers this machine only"}
    elif environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
        status, doc = "405 Method Not Allowed", {"message": "GET /_kinesim/modules"}
    else:
        status, doc = "200 OK", {"modules": sorted({name.partition(".")[0] for name in list(sys.modules)})}
    body = orjson.dumps(doc)
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def reset(edge: "Edge", environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
    """POST /_kinesim/reset: every service's state as a freshly started server has it, or with
    `?services=kinesis,s3` those named's (`Services.reset`): between two tests, for kinesim's pytest
    plugin or any runner. `{"reset": [the services], "seconds": how long it took}`; 400 for a name
    that is no service's. This machine only; answered without Flask (a reset drops its app)."""
    if not is_loopback(environ.get("REMOTE_ADDR")):
        status, doc = "403 Forbidden", {"message": "/_kinesim/reset answers this machine only"}
    elif environ.get("REQUEST_METHOD") != "POST":
        status, doc = "405 Method Not Allowed", {"message": "POST /_kinesim/reset[?services=kinesis,s3,...]"}
    else:
        started = time.monotonic()
        try:
            done = edge.reset(parse_qs(environ.get("QUERY_STRING", "")).get("services", []))
        except ValueError as err:
            status, doc = "400 Bad Request", {"message": str(err)}
        else:
            status, doc = "200 OK", {"reset": list(done), "seconds": round(time.monotonic() - started, 3)}
    body = orjson.dumps(doc)
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def admin_app(edge: "Edge") -> "Flask":
    """The Flask app of kinesim's own routes, over the edge's services."""
    from flask import Flask, Response, abort, jsonify, request, send_file

    from .functions.runtimes import runnable as runnable_runtimes
    from .webconsole import register as register_console
    from .webconsole.scope import UnknownScope, scope_docs, scope_for

    app = Flask("kinesim")

    # The routes that read one scope's state take ?account=&region= as the console's do
    # (webconsole/scope.py): left out, the server's own.
    @app.errorhandler(UnknownScope)
    def unknown_scope(err: UnknownScope):
        return jsonify(message=err.message, code=err.code), err.status

    # A delivery stream's delivery metrics (CloudWatch's DeliveryToS3.* and friends).
    @app.get("/_kinesim/firehose/<name>/metrics")
    def firehose_metrics(name: str):
        scope = scope_for(edge, request)
        found = scope.firehose.deliveries.metrics(name)
        if found is None:
            return jsonify(message=f"Firehose {name} under account {scope.settings.account_id} not found."), 404
        return jsonify(found)

    @app.get("/_kinesim/health")
    def health():
        doc = dict(status="running",
                   services={name: "running" for name in ("kinesis", "lambda", "firehose", "s3", "logs", "sqs", "sns",
                                                          "ecr", "cloudformation", "sts", "ssm", "iam")},
                   region=edge.settings.region, account_id=edge.settings.account_id,
                   runtimes=runnable_runtimes(),  # every Lambda Runtime value this server runs now
                   scopes=scope_docs(edge))  # the (account, region) pairs in use, the server's own first
        if is_loopback(request.remote_addr):
            # Where buckets are plain directories (a temp one when in memory): `kinesim sql` on
            # this machine reads delivered objects from there. Other machines have no use for
            # the paths and are not told them.
            doc.update(data_dir=None if edge.settings.in_memory else edge.settings.data_dir,
                       s3_root=os.path.realpath(edge.s3_root))  # the object store's root, unmade
        return jsonify(doc)

    # A stack's state as the CloudFormation engine keeps it (what each resource is, the operation
    # under way): for tests and for looking inside; PUT stands in for what a killed server left.
    @app.get("/_kinesim/stacks/<name>")
    def get_stack(name: str):
        stack = scope_for(edge, request).store.document("stack", name)
        return (jsonify(stack), 200) if stack is not None else (jsonify(message=f"Stack {name} does not exist"), 404)

    @app.put("/_kinesim/stacks/<name>")
    def put_stack(name: str):
        try:
            body = orjson.loads(request.get_data())
            if not isinstance(body, dict):
                return jsonify(message="A stack is a JSON object"), 400
            scope_for(edge, request).store.put_document("stack", name, body)
        except (orjson.JSONDecodeError, RecursionError):  # json's encoder stops at ~1000 levels
            return jsonify(message="A stack is a JSON object (nested less than 1000 levels deep)"), 400
        return jsonify(body)

    # A custom resource provider's answer to CloudFormation (its request's ResponseURL).
    @app.put("/_kinesim/cloudformation/responses/<token>")
    def custom_resource_response(token: str):
        from .cloudformation.custom_responses import EXPIRED, MAX_RESPONSE_BYTES
        data = request.stream.read(MAX_RESPONSE_BYTES + 1)  # past the limit, the rest is not read
        # The engine of the scope whose stack sent the request (none made: no request waits).
        engines = [s.cloudformation.service for s in edge.scopes() if s.cloudformation.made]
        waiting = next((e.responses for e in engines if e.responses.awaits(token)), None)
        status, headers, body = EXPIRED if waiting is None else waiting.deliver(token, data)
        return Response(body, status, headers)

    # The lines of a stack's last operation (one per resource, as `kinesim deploy` prints them),
    # from line `since` on, and whether it is done: `kinesim deploy` follows its deploy here.
    @app.get("/_kinesim/stacks/<name>/log")
    def stack_log(name: str):
        try:
            since = max(0, int(request.args.get("since", "0")))
        except ValueError:
            return jsonify(message="since is a line number"), 400
        cloudformation = scope_for(edge, request).cloudformation
        found = cloudformation.service.runner.view(name, since) if cloudformation.made else None
        return (jsonify(found), 200) if found is not None else (jsonify(message=f"Stack {name} has no operation"), 404)

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
        logs = scope_for(edge, request).functions.logs
        return jsonify(logGroupName=logs.group_name(function),
                       events=logs.read(function, since, max(1, min(limit, 10000))))

    # GetFunction's Code.Location: the deployment package as uploaded.
    @app.get("/_kinesim/functions/<function>/code.zip")
    def function_code(function: str):
        functions = scope_for(edge, request).functions
        fn = functions.functions.get(function)
        path = fn and functions.code.package_path(function, fn.get("PackageId", ""))
        if not path:
            abort(404)
        return send_file(path, mimetype="application/zip", download_name=f"{function}.zip")

    register_console(app, edge)  # the web console: /_kinesim/console/
    return app
