"""The services of one server, each made on first use.

Kinesis is made before the server listens: it is the data plane, and the first call a client makes.
Every other service is made on its first use (`lazy.py`), or at once in the background when the
data directory holds something of its that must resume (delivery streams, event source mappings,
buckets, log groups: `Services._resume`). The stand-ins that route to them (`services`, `s3`,
`lambda_rest`, `query_apps`, `sqs`) exist from the start and stay the same objects once the
services behind them are made: the request path (`edge.py`) compares apps and services by identity.
A reset (`reset`, `POST /_kinesim/reset`) closes services, deletes their state and has the stand-ins
make them anew.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import threading
from typing import Any, Callable, Iterable

from .cloudformation.lazy import LazyCloudFormation
from .config import Settings
from .destinations import Destinations
from .kinesis import channel_delivery
from .kinesis.retention import Sweeper
from .kinesis.service import KinesisService
from .lazy import Lazy, LazyApp, LazyService
from .long_polls import LongPolls
from .protocol.request_ids import request_id
from .store import Store

log = logging.getLogger("kinesim.services")

# The first path segment of Lambda's REST API (an API date, as "/2015-03-31/functions"), and of
# nothing else the edge routes by path: requests that do not start so need no Lambda to be made.
_API_DATE = re.compile(r"/\d{4}-\d{2}-\d{2}/")


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
        self._sns = Lazy(self._make_sns)
        self._sts = Lazy(self._make_sts)
        self._iam = Lazy(self._make_iam)
        self._principals = Lazy(self._make_principals)
        # The query-protocol services, by the name requests to them are signed for.
        self.query_apps: dict[str, Any] = {"sns": LazyApp(Lazy(self._make_sns_app)),
                                           "sts": LazyApp(Lazy(self._make_sts_app)),
                                           "iam": LazyApp(Lazy(self._make_iam_app))}
        self._register_senders()
        self.channel_delivery.start()
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

    @property
    def iam(self) -> Any:
        return self._iam.get()

    @property
    def principals(self) -> Any:
        """IAM's users' keys and roles, for STS and --verify-signatures (without making IAM)."""
        return self._principals.get()

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
                                  queues=self.sqs.consumers, files_dir=self._functions_files())
        # Asynchronous invocations accepted before a restart resume, now that their destinations can be reached.
        functions.async_invoker.start()
        return functions

    def _functions_files(self) -> str:
        """Where functions' code, layers and logs are kept: the data directory, or with --in-memory
        a temporary directory of this server's (kept across resets, removed by `close`)."""
        if not self.settings.in_memory:
            return self.settings.data_dir
        if self._functions_tmp is None:
            self._functions_tmp = tempfile.mkdtemp(prefix="kinesim-functions-")
        return self._functions_tmp

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
        return StsService(self.settings, self.store, self.principals)

    def _make_sts_app(self) -> Any:
        from .sts.api import sts_app
        return sts_app(self.sts)

    def _make_iam(self) -> Any:
        from .iam.service import IamService
        return IamService(self.settings, self.store)

    def _make_principals(self) -> Any:
        from .iam.principals import Principals
        return Principals(self.store, self.settings.account_id)

    def _make_iam_app(self) -> Any:
        from .iam.api import iam_app
        return iam_app(self.iam)

    def _cloudformation(self) -> tuple[Any, Any]:
        from .cloudformation.api import cloudformation_app
        from .cloudformation.service import CloudFormationService
        from .functions.runtimes import runnable as runnable_runtimes
        service = CloudFormationService(self.settings, self.store, self._read_object,
                                        lambda: self.functions.endpoint_url, self._own_credentials, runnable_runtimes)
        return service, cloudformation_app(service)

    def _read_object(self, bucket: str, key: str) -> bytes:
        """An object's bytes (CloudFormation's TemplateURL): S3's errors as AwsError."""
        handle, _ = self.objects.open_object(bucket, key)
        with handle:
            return handle.read()

    def _register_senders(self) -> None:
        """The in-process deliveries by ARN that SNS subscriptions and OnFailure destinations use:
        to an SNS topic (a Publish), a Lambda function (an asynchronous invocation: the function is
        looked up first, so that a missing one is the sender's error) and a Firehose delivery
        stream (a PutRecord through Firehose's own checks). The trace header goes on to SNS and
        Lambda, which carry it as they do a request's (Firehose, like Kinesis, is not part of
        Lambda's recursive loop detection)."""
        def to_lambda(arn: str, message: bytes, attributes: Any, trace_header: str | None) -> None:
            self.functions.function(arn)
            self.functions.async_invoker.submit(arn, message, request_id(), trace_header)

        def to_firehose(arn: str, message: bytes, attributes: Any, trace_header: str | None) -> None:
            name = arn.split(":", 5)[5].partition("/")[2]
            self.firehose.call("PutRecord", {"DeliveryStreamName": name, "Record": {"Data": message}}, cbor=True)

        def to_sns(arn: str, message: bytes, attributes: Any, trace_header: str | None) -> None:
            self.sns.call("Publish", {"TopicArn": arn, "Message": message.decode("utf-8", "replace"),
                                      **(attributes or {})}, trace_header)

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
        if self._functions_tmp is not None:
            shutil.rmtree(self._functions_tmp, ignore_errors=True)

    # Reset (`POST /_kinesim/reset`): see reset.py for what each service keeps

    def reset(self, names: Iterable[str] = ()) -> tuple[str, ...]:
        """Leave the named services (all of them when none is named) as a freshly started server
        has them, and answer their names; ValueError for a name that is no service's.

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
            if "cloudformation" in named and self.cloudformation.made:
                resets.stop_stack_operations(self.cloudformation.service)
            closers = self._closers()
            closed = {name: self._made_of(name) for name in remade}
            for name in _CLOSE_ORDER:
                if name in remade and closed[name] is not None:
                    if name == "kinesis":
                        resets.stop_kinesis(self.kinesis)
                    closers[name](closed[name])
            files = self._functions_tmp if self.settings.in_memory else self.settings.data_dir
            resets.delete_state(self.store, named, self.s3_root, files, self._functions.if_made())
            for name in remade:
                late = self._remake(name)
                if late is not None and late is not closed[name]:  # made while the old one closed
                    closers[name](late)
            self._resume()
        log.info("reset %s", ", ".join(named))
        return named

    def _made_of(self, name: str) -> Any:
        """The service of that name if it was made (None: it has nothing to stop)."""
        if name == "kinesis":
            return self.kinesis
        if name == "cloudformation":
            return self.cloudformation.service if self.cloudformation.made else None
        return self._lazy_of(name).if_made()

    def _lazy_of(self, name: str) -> Lazy:
        return {"s3": self._objects, "lambda": self._functions, "sns": self._sns, "sts": self._sts,
                "iam": self._iam}.get(name) or self._lazy_services[_TARGET_PREFIXES[name]]

    def _closers(self) -> dict[str, Callable[[Any], None]]:
        """How each service's background work stops, as `close` stops it."""
        def objects(made: Any) -> None:
            self.lifecycle_sweeper.stop()
            made.notifications.close()

        def kinesis(made: Any) -> None:
            self.channel_delivery.close()
            self.sweeper.stop()
            made.close()

        closers: dict[str, Callable[[Any], None]] = {
            name: lambda made: getattr(made, "close", lambda: None)() for name in _CLOSE_ORDER}
        closers.update(s3=objects, kinesis=kinesis, cloudformation=lambda made: None)
        return closers

    def _remake(self, name: str) -> Any:
        """Have the service of that name made anew (Kinesis at once, the others on first use);
        what was made until now, if anything."""
        if name == "kinesis":
            self.kinesis = KinesisService(self.settings, self.store, self.long_polls)
            self.services[self.kinesis.target_prefix] = self.kinesis
            self.channel_delivery = channel_delivery.attach(
                self.kinesis, lambda bucket: self.objects.bucket_exists(bucket),
                lambda *args, **kwargs: self.objects.put_object(*args, **kwargs))
            self.channel_delivery.start()
            self.sweeper = Sweeper(self.kinesis, self.settings.retention_sweep_s)
            self.sweeper.start()
            return None
        if name == "cloudformation":
            return self.cloudformation.forget()
        app = {"s3": self.s3, "lambda": self.lambda_rest, "sns": self.query_apps["sns"],
               "sts": self.query_apps["sts"], "iam": self.query_apps["iam"]}.get(name)
        if app is not None:
            app.forget()
            return self._lazy_of(name).forget()
        return self.services[_TARGET_PREFIXES[name]].forget()  # the stand-in forgets its cached methods


# The order services stop in (`close`'s): those that call others first, Kinesis last.
_CLOSE_ORDER = ("cloudformation", "s3", "sns", "firehose", "logs", "sqs", "lambda", "ecr", "ssm", "iam", "sts",
                "kinesis")
_TARGET_PREFIXES = {"sqs": "AmazonSQS", "firehose": "Firehose_20150804", "logs": "Logs_20140328",
                    "ecr": "AmazonEC2ContainerRegistry_V20150921", "ssm": "AmazonSSM"}


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

