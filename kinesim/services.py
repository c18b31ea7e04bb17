"""The services of one server: the composition root.

Every resource lives in an account and a region (issue 34). The services of each (account, region)
are a `ScopeServices` (`scope_services.py`), made when a request or a stored document first uses
the scope; the server's own scope (`--account-id`, `--region`) is made at start. What every scope
shares is made here: the store, the object store (bucket names are global, as on AWS), STS, IAM
(one per account), the deliveries between services by ARN, the cap on long polls and the shard uids.

The stand-ins that route to the services (`s3`, `lambda_rest`, `query_apps`) exist from the start
and stay the same objects: the request path (`edge.py`) compares apps by identity. Those of the
per-scope services pick the request's scope on each call (`ScopedApp`). A reset (`reset`,
`POST /_kinesim/reset`) closes services in every scope, deletes their state and has the stand-ins
make them anew.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import tempfile
import threading
from typing import Any, Callable, Iterable

from .config import Settings
from .destinations import Destinations
from .kinesis.uids import ShardUids
from .lazy import Lazy, LazyApp
from .long_polls import LongPolls
from .protocol.errors import AwsError
from .protocol.request_ids import request_id
from .scope_services import API_DATE, ScopeServices
from .scoped_store import ScopedStore, prefix, scopes_with_documents
from .cross_account import CrossAccount
from .scopes import SERVED_BY, Resolver, Scope, is_account, is_region
from .store import Store

log = logging.getLogger("kinesim.services")

MAX_SCOPES = 200


class Services:
    """What one server serves, and what it started to serve it (`close` stops it). `own_credentials`:
    those this server's own clients (CloudFormation's engine) sign with, one it accepts."""

    def __init__(self, settings: Settings, own_credentials: dict[str, str]):
        self.settings = settings
        self._own_credentials = own_credentials
        self.store = Store(None if settings.in_memory else settings.data_dir)
        self._reset_lock = threading.Lock()  # one reset at a time (`reset`)
        self._functions_tmp: str | None = None  # --in-memory: functions' code and logs (`_functions_files`)
        # In-process deliveries between services by ARN (OnFailure destinations, SNS subscriptions):
        # each receiving service registers its sender here, which finds the ARN's scope.
        self.destinations = Destinations()
        # One cap for the long polls of every service: each holds a request thread while it waits.
        self.long_polls = LongPolls(settings.max_long_polls)
        self.shard_uids = ShardUids(self.store)
        self.shard_uids.finish_interrupted_drops()  # before any scope's Kinesis reads its streams
        # Buckets live beside the database (the S3 API serves the same store). The directory is
        # there from the start: readers of delivered files (`kinesim sql`) are given it by /health.
        self.s3_root = os.path.join(os.path.dirname(self.store.path), "s3")
        os.makedirs(self.s3_root, exist_ok=True)
        self._objects = Lazy(self._make_objects)
        self.s3 = LazyApp(Lazy(self._make_s3))
        self._sts = Lazy(self._make_sts)
        self._accounts: dict[str, _Account] = {}
        self._accounts_lock = threading.Lock()
        # Key ids that the engines of other accounts' scopes sign with -> their secret (accepted
        # under --verify-signatures as the server's own credentials are).
        self.scope_secrets: dict[str, str] = {}
        self.default_scope = Scope(settings.account_id, settings.region)
        self.resolve = Resolver(self.default_scope, self._issued_account,
                                lambda key, account: self.account(account).principals.active_key(key) is not None)
        self._scopes: dict[Scope, ScopeServices] = {}
        self._scopes_lock = threading.Lock()
        self.own_scope = self.scope(self.default_scope)
        for account, region in sorted(scopes_with_documents(self.store)):
            self.scope(Scope(account, region))  # their streams load, their stacks resume
        self.cross_account = CrossAccount(self)  # calls into other accounts' resources
        # The stand-ins of the per-scope apps: each call goes to the request's scope's.
        self.lambda_rest = ScopedApp(self, lambda s: s.lambda_rest, lambda environ: bool(
            API_DATE.match(environ.get("PATH_INFO", ""))))
        # The query-protocol services, by the name requests to them are signed for.
        self.query_apps: dict[str, Any] = {
            "sns": ScopedApp(self, lambda s: s.sns_app),
            "sts": LazyApp(Lazy(self._make_sts_app)),
            "iam": ScopedApp(self, lambda s: self.account(s.scope.account).app),
            "cloudformation": ScopedApp(self, lambda s: s.cloudformation)}
        self._register_senders()
        self._resuming = threading.Thread(target=self._resume, name="kinesim-resume", daemon=True)
        self._resuming.start()

    # Scopes

    def scope(self, scope: Scope) -> ScopeServices:
        """The services of an account and region, made on first use."""
        made = self._scopes.get(scope)
        if made is None:
            with self._scopes_lock:
                made = self._scopes.get(scope)
                if made is None:
                    if len(self._scopes) >= MAX_SCOPES:
                        # Each scope holds services and threads: clients that make up account ids
                        # or regions must not exhaust the server for everyone else.
                        raise AwsError("LimitExceededException", f"kinesim serves at most {MAX_SCOPES} "
                                       f"pairs of account and region, and account {scope.account} in "
                                       f"{scope.region} would be one more; restart the server with "
                                       "fewer in use.", 400)
                    made = self._scopes[scope] = self._make_scope(scope)
        return made

    def existing_scope(self, scope: Scope) -> ScopeServices | None:
        """The services of an account and region if a request or a stored document made them."""
        return self._scopes.get(scope)

    def scope_of(self, environ: dict[str, Any]) -> ScopeServices:
        """The services of the account and region a request is for (`scopes.py`), or of the
        account whose resource it may use (`cross_account.py`)."""
        return self.scope(environ.get(SERVED_BY) or self.resolve(environ))

    def scope_of_arn(self, arn: str) -> ScopeServices:
        """The services of the account and region an ARN names (the server's own for an ARN that
        names none, whose service then answers that it has no such resource)."""
        parts = arn.split(":", 5)
        if len(parts) == 6 and is_region(parts[3]) and is_account(parts[4]):
            return self.scope(Scope(parts[4], parts[3]))
        return self.own_scope

    def scopes(self) -> list[ScopeServices]:
        """Every scope made, the server's own first."""
        with self._scopes_lock:
            return sorted(self._scopes.values(), key=lambda s: (s is not self.own_scope, s.scope.account,
                                                                s.scope.region))

    def _make_scope(self, scope: Scope) -> ScopeServices:
        if scope == self.default_scope:
            return ScopeServices(self, scope, self.settings, self.store, self._functions_files, self._own_credentials)
        settings = dataclasses.replace(self.settings, account_id=scope.account, region=scope.region)
        self.scope_secrets[scope.account] = self._own_credentials["aws_secret_access_key"]
        credentials = {"aws_access_key_id": scope.account,
                       "aws_secret_access_key": self._own_credentials["aws_secret_access_key"]}
        files = lambda: os.path.join(self._functions_files(), "scopes", scope.account, scope.region)  # noqa: E731
        return ScopeServices(self, scope, settings, ScopedStore(self.store, prefix(scope.account, scope.region)),
                             files, credentials)

    def account(self, account: str) -> "_Account":
        """What belongs to a whole account (IAM), made on first use."""
        made = self._accounts.get(account)
        if made is None:
            with self._accounts_lock:
                made = self._accounts.setdefault(account, _Account(self, account))
        return made

    def _issued_account(self, key: str) -> str | None:
        issued = self.sts.credentials.lookup(key)
        return issued["identity"]["Account"] if issued else None

    # The server's own scope's services, as the console, the command-line tools and tests use them

    @property
    def kinesis(self) -> Any:
        return self.own_scope.kinesis

    @property
    def services(self) -> dict[str, Any]:
        return self.own_scope.services

    @property
    def sqs(self) -> Any:
        return self.own_scope.sqs

    @property
    def functions(self) -> Any:
        return self.own_scope.functions

    @property
    def firehose(self) -> Any:
        return self.own_scope.firehose

    @property
    def logs(self) -> Any:
        return self.own_scope.logs

    @property
    def ecr(self) -> Any:
        return self.own_scope.ecr

    @property
    def ssm(self) -> Any:
        return self.own_scope.ssm

    @property
    def sns(self) -> Any:
        return self.own_scope.sns

    @property
    def cloudformation(self) -> Any:
        return self.own_scope.cloudformation

    # What every scope shares

    @property
    def objects(self) -> Any:
        return self._objects.get()

    @property
    def sts(self) -> Any:
        return self._sts.get()

    @property
    def iam(self) -> Any:
        return self.account(self.default_scope.account).iam

    @property
    def principals(self) -> Any:
        """IAM's users' keys and roles of the server's account, for STS and --verify-signatures."""
        return self.account(self.default_scope.account).principals

    def _resume(self) -> None:
        """Make, in the background, the services that have work to carry on after a restart: the
        object store (S3 event notifications recorded before it, lifecycle rules) when there are
        buckets, and in each scope those `ScopeServices.resume` names."""
        try:
            if _has_buckets(self.s3_root):
                self._objects.get()
            for scope in self.scopes():
                scope.resume()
        except Exception:  # e.g. the server closed meanwhile; what was not made is made on first use
            log.exception("could not resume the services at start-up")

    def _make_objects(self) -> Any:
        from .s3.lifecycle_sweep import LifecycleSweeper
        from .s3.notifications import BucketNotifications
        from .s3.objects import ObjectStore
        objects = ObjectStore(self.s3_root, self.settings.region, default_owner=self.settings.account_id)
        # S3 event notifications: recorded by the object store inside each write, delivered through
        # the senders (SQS, SNS, Lambda's asynchronous invocation).
        notifications = BucketNotifications(objects.root, self.settings.account_id, self.destinations,
                                            lambda arn: self.scope_of_arn(arn).functions.function(arn),
                                            lambda bucket: objects.bucket_info(bucket).region,
                                            lambda bucket: objects.bucket_info(bucket).owner)
        objects.notifications = notifications
        notifications.start()  # delivers what was recorded before a restart
        # S3 lifecycle rules: expired objects deleted, stale multipart uploads aborted.
        self.lifecycle_sweeper = LifecycleSweeper(objects)
        self.lifecycle_sweeper.start()
        return objects

    def _make_s3(self) -> Any:
        from .s3.api import S3App
        return S3App(self.objects, self.settings,
                     lambda environ: self.cross_account.caller(environ, self.resolve(environ)))

    def _functions_files(self) -> str:
        """Where functions' code, layers and logs are kept: the data directory, or with --in-memory
        a temporary directory of this server's (kept across resets, removed by `close`). Other
        scopes than the server's own keep theirs under `scopes/<account>/<region>` in it."""
        if not self.settings.in_memory:
            return self.settings.data_dir
        if self._functions_tmp is None:
            self._functions_tmp = tempfile.mkdtemp(prefix="kinesim-functions-")
        return self._functions_tmp

    def _make_sts(self) -> Any:
        from .sts.service import StsService
        return StsService(self.settings, self.store, lambda account: self.account(account).principals,
                          self.resolve.account_of)

    def _make_sts_app(self) -> Any:
        from .sts.api import sts_app
        return sts_app(self.sts)

    def bucket_owner(self, bucket: str) -> str | None:
        """The account that owns a bucket (None: no such bucket), for Kinesis channels."""
        objects = self.objects
        return objects.bucket_info(bucket).owner if objects.bucket_exists(bucket) else None

    def read_object(self, bucket: str, key: str) -> bytes:
        """An object's bytes (CloudFormation's TemplateURL): S3's errors as AwsError."""
        handle, _ = self.objects.open_object(bucket, key)
        with handle:
            return handle.read()

    def _register_senders(self) -> None:
        """The in-process deliveries by ARN that SNS subscriptions, OnFailure destinations and S3
        notifications use, each to the service of the ARN's account and region: to an SQS queue,
        an SNS topic (a Publish), a Lambda function (an asynchronous invocation: the function is
        looked up first, so that a missing one is the sender's error) and a Firehose delivery
        stream (a PutRecord through Firehose's own checks). The trace header goes on to SNS and
        Lambda, which carry it as they do a request's (Firehose, like Kinesis, is not part of
        Lambda's recursive loop detection)."""
        def to_sqs(arn: str, message: bytes, attributes: Any, trace_header: str | None) -> None:
            self.scope_of_arn(arn).sqs.send_to_arn(arn, message, attributes, trace_header)

        def to_lambda(arn: str, message: bytes, attributes: Any, trace_header: str | None) -> None:
            functions = self.scope_of_arn(arn).functions
            functions.function(arn)
            functions.async_invoker.submit(arn, message, request_id(), trace_header)

        def to_firehose(arn: str, message: bytes, attributes: Any, trace_header: str | None) -> None:
            name = arn.split(":", 5)[5].partition("/")[2]
            self.scope_of_arn(arn).firehose.call("PutRecord", {"DeliveryStreamName": name,
                                                               "Record": {"Data": message}}, cbor=True)

        def to_sns(arn: str, message: bytes, attributes: Any, trace_header: str | None) -> None:
            self.scope_of_arn(arn).sns.call("Publish", {"TopicArn": arn, "Message": message.decode("utf-8", "replace"),
                                                        **(attributes or {})}, trace_header)

        for service, send in (("sqs", to_sqs), ("lambda", to_lambda), ("firehose", to_firehose), ("sns", to_sns)):
            self.destinations.register(service, send)

    def close(self) -> None:
        """Stop what was started; a service never made has nothing to stop."""
        self._resuming.join()  # nothing is being made while the rest closes
        objects = self._objects.if_made()
        if objects is not None:
            self.lifecycle_sweeper.stop()
            objects.notifications.close()
        for scope in self.scopes():
            scope.close()
        self.store.close()
        if self._functions_tmp is not None:
            shutil.rmtree(self._functions_tmp, ignore_errors=True)

    # Reset (`POST /_kinesim/reset`): see reset.py for what each service keeps

    def reset(self, names: Iterable[str] = ()) -> tuple[str, ...]:
        """Leave the named services (all of them when none is named) as a freshly started server
        has them, in every scope, and answer their names; ValueError for a name that is no service's.

        Their background work is stopped and their resources deleted (from memory, the store and
        disk), then each is made again on its next use. The services that hold one of them
        (`reset.HOLDERS`) are closed and made again too, keeping their own resources: as after a
        restart, they resume from the store (`_resume`, run before this answers). A request in
        flight meanwhile may see the old service closing (an error answer), never a crash."""
        from . import reset as resets
        named = resets.checked(names)
        with self._reset_lock:
            self._resuming.join()
            remade = resets.with_holders(named)
            scopes = self.scopes()
            if "cloudformation" in named:
                for scope in scopes:
                    if scope.cloudformation.made:
                        resets.stop_stack_operations(scope.cloudformation.service)
            closed = {(scope.scope, name): scope.made_of(name) for scope in scopes for name in remade
                      if name not in _SHARED}
            for name in _CLOSE_ORDER:
                if name not in remade:
                    continue
                if name in _SHARED:
                    self._close_shared(name)
                    continue
                for scope in scopes:
                    made = closed[scope.scope, name]
                    if made is not None:
                        if name == "kinesis":
                            resets.stop_kinesis(made)
                        scope.close_for_reset(name, made)
            files = self._functions_tmp if self.settings.in_memory else self.settings.data_dir
            resets.delete_state(self.store, named, self.s3_root, files, [] if files is None else
                                [(scope.files_dir, scope.functions_if_made()) for scope in scopes])
            for name in remade:
                if name in _SHARED:
                    self._remake_shared(name)
                    continue
                for scope in scopes:
                    late = scope.remake(name)
                    if late is not None and late is not closed[scope.scope, name]:  # made while the old one closed
                        scope.close_for_reset(name, late)
            self._resume()
        log.info("reset %s", ", ".join(named))
        return named

    def _close_shared(self, name: str) -> None:
        if name == "s3":
            objects = self._objects.if_made()
            if objects is not None:
                self.lifecycle_sweeper.stop()
                objects.notifications.close()
        elif name == "sts" and self._sts.made:
            getattr(self.sts, "close", lambda: None)()

    def _remake_shared(self, name: str) -> None:
        if name == "s3":
            self.s3.forget()
            self._objects.forget()
        elif name == "sts":
            self.query_apps["sts"].forget()
            self._sts.forget()
        elif name == "iam":
            for account in list(self._accounts.values()):
                account.forget()


# The order services stop in (`close`'s): those that call others first, Kinesis last.
_CLOSE_ORDER = ("cloudformation", "s3", "sns", "firehose", "logs", "sqs", "lambda", "ecr", "ssm", "iam", "sts",
                "kinesis")
# The services every scope shares (the root's); the others are each scope's.
_SHARED = frozenset(("s3", "sts", "iam"))


class _Account:
    """What belongs to a whole account rather than to one of its regions: IAM (its users, roles and
    policies, and the keys of its users, which tell a request's account: `scopes.Resolver`)."""

    def __init__(self, root: Services, account: str):
        own = account == root.default_scope.account
        self.store = root.store if own else ScopedStore(root.store, prefix(account, ""))
        self.settings = dataclasses.replace(root.settings, account_id=account)
        self._iam = Lazy(self._make_iam)
        self._principals = Lazy(self._make_principals)
        self.app = LazyApp(Lazy(self._make_app))

    @property
    def iam(self) -> Any:
        return self._iam.get()

    @property
    def principals(self) -> Any:
        """IAM's users' keys and roles (without making IAM)."""
        return self._principals.get()

    def _make_iam(self) -> Any:
        from .iam.service import IamService
        return IamService(self.settings, self.store)

    def _make_principals(self) -> Any:
        from .iam.principals import Principals
        return Principals(self.store, self.settings.account_id)

    def _make_app(self) -> Any:
        from .iam.api import iam_app
        return iam_app(self.iam)

    def forget(self) -> None:
        self.app.forget()
        self._iam.forget()


class ScopedApp:
    """Stands in for a per-scope WSGI app in the edge's routing: each call goes to the app of the
    request's scope (`app_of(root.scope_of(environ))`). What does not depend on the scope (whether
    a request is the app's, the shape of its errors) is the server's own scope's app's answer.
    `might_accept(environ)`, when given, answers `accepts` for requests that cannot be the app's
    without making it."""

    def __init__(self, root: Services, app_of: Callable[[ScopeServices], Any],
                 might_accept: Callable[[dict[str, Any]], bool] | None = None):
        self._root = root
        self._app_of = app_of
        self._might_accept = might_accept

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        try:
            app = self._app_of(self._root.scope_of(environ))
        except AwsError as err:  # no services for the request's scope (too many pairs)
            status, headers, body = self.error_answer(err, environ)
            start_response(status, headers + [("Content-Length", str(len(body)))])
            return [body]
        return app(environ, start_response)

    def accepts(self, environ: dict[str, Any]) -> bool:
        if self._might_accept is not None and not self._might_accept(environ):
            return False
        return self._app_of(self._root.own_scope).accepts(environ)

    def error_answer(self, err: Any, environ: dict[str, Any] | None = None) -> tuple[str, list, bytes]:
        return self._app_of(self._root.own_scope).error_answer(err, environ)


def _has_buckets(s3_root: str) -> bool:
    """Whether the object store holds a bucket (its buckets are its root's directories whose names
    do not start with a dot: ObjectStore.list_buckets), without making it."""
    try:
        with os.scandir(s3_root) as entries:
            return any(not e.name.startswith(".") and e.is_dir() for e in entries)
    except FileNotFoundError:
        return False

