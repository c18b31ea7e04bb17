"""The services of one account and region (issue 34), each made on first use.

A server holds one `ScopeServices` per (account, region) a request or a stored document has used
(`services.py`, the composition root, makes them); what is shared by every scope (the store, the
object store, STS, IAM per account, the deliveries between services, the cap on long polls, the
shard uids) is the root's, given to each scope as `root`.

Kinesis is made with the scope: it is the data plane, and the first call a client makes. Every
other service is made on its first use (`lazy.py`), or at once in the background when the store
holds something of its that must resume (`resume`). The stand-ins that route to them (`services`,
`lambda_rest`, `sns_app`, `sqs`, `cloudformation`) stay the same objects once the services behind
them are made; each scope has its own, so that the methods a stand-in keeps are never another
scope's.
"""
from __future__ import annotations

import logging
import re
from typing import Any, Callable

from .cloudformation.lazy import LazyCloudFormation
from .config import Settings
from .kinesis import channel_delivery
from .kinesis.retention import Sweeper
from .kinesis.service import KinesisService
from .lazy import Lazy, LazyApp, LazyService
from .scopes import Scope

log = logging.getLogger("kinesim.services")

# The first path segment of Lambda's REST API (an API date, as "/2015-03-31/functions"), and of
# nothing else the edge routes by path: requests that do not start so need no Lambda to be made.
API_DATE = re.compile(r"/\d{4}-\d{2}-\d{2}/")

# The JSON-protocol services made on first use, by their X-Amz-Target prefix (each class's
# `target_prefix`, checked when it is made), and the names of them a reset takes.
TARGET_PREFIXES = {"sqs": "AmazonSQS", "firehose": "Firehose_20150804", "logs": "Logs_20140328",
                   "ecr": "AmazonEC2ContainerRegistry_V20150921", "ssm": "AmazonSSM"}


class ScopeServices:
    def __init__(self, root: Any, scope: Scope, settings: Settings, store: Any, files_dir: Callable[[], str],
                 credentials: dict[str, str]):
        self.root = root
        self.scope = scope
        self.settings = settings  # the server's, with this scope's account and region
        self.store = store  # this scope's view (`scoped_store.py`)
        self._files_dir = files_dir  # where functions' code, layers and logs are kept
        self._credentials = credentials  # those CloudFormation's engine signs with, for this scope
        self.services: dict[str, Any] = {}
        self._start_kinesis()
        self._lazy_services = {prefix: Lazy(make) for prefix, make in (
            ("AmazonSQS", self._make_sqs), ("Firehose_20150804", self._make_firehose),
            ("Logs_20140328", self._make_logs), ("AmazonEC2ContainerRegistry_V20150921", self._make_ecr),
            ("AmazonSSM", self._make_ssm))}
        for prefix, lazy in self._lazy_services.items():
            self.services[prefix] = LazyService(lazy, prefix)
        self.sqs = self.services["AmazonSQS"]
        self._functions = Lazy(self._make_functions)
        # Lambda's REST API: its paths start with one of the model's API dates.
        self.lambda_rest = LazyApp(Lazy(self._make_lambda_rest), lambda environ: bool(
            API_DATE.match(environ.get("PATH_INFO", ""))))
        self._sns = Lazy(self._make_sns)
        self.sns_app = LazyApp(Lazy(self._make_sns_app))
        # CloudFormation last: its engine calls the other services through the server, and carries
        # on the stack operations a restart interrupted once the server answers.
        self.cloudformation = LazyCloudFormation(store, self._cloudformation)

    def _start_kinesis(self) -> None:
        self.kinesis = KinesisService(self.settings, self.store, self.root.long_polls, self.root.shard_uids)
        self.services[self.kinesis.target_prefix] = self.kinesis
        # Kinesis channels write into the buckets through the object store's public calls.
        self.channel_delivery = channel_delivery.attach(
            self.kinesis, self.root.bucket_owner,
            lambda *args, **kwargs: self.root.objects.put_object(*args, **kwargs))
        self.channel_delivery.start()
        self.sweeper = Sweeper(self.kinesis, self.settings.retention_sweep_s)
        self.sweeper.start()

    # The services, each made on first use (see `resume` for those made at start-up)

    @property
    def objects(self) -> Any:
        return self.root.objects

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
    def files_dir(self) -> str:
        """Where this scope's functions' code, layers and logs are kept."""
        return self._files_dir()

    def functions_if_made(self) -> Any:
        return self._functions.if_made()

    def resume(self) -> None:
        """Make the services that have work to carry on after a restart: Lambda (event source
        mapping pollers, asynchronous invocations) when there are functions; Firehose (delivery
        workers) when there are delivery streams; CloudWatch Logs (retention) when there are log
        groups. A request that needs one meanwhile waits for it."""
        if any(self.store.documents(kind) for kind in ("function", "mapping", "lambda-async-event")):
            self._functions.get()
        for prefix, kind in (("Firehose_20150804", "firehose-stream"), ("Logs_20140328", "logs-group")):
            if self.store.documents(kind):
                self._lazy_services[prefix].get()

    def _make_sqs(self) -> Any:
        from .sqs.service import SqsService
        return _checked(SqsService(self.settings, self.store, self.root.long_polls), "AmazonSQS")

    def _make_functions(self) -> Any:
        # SQS first: the pollers of SQS event source mappings resume as the Lambda service starts.
        from .functions.service import LambdaService
        functions = LambdaService(self.settings, self.store, self.kinesis, self.objects, self.root.destinations,
                                  queues=self.sqs.consumers, files_dir=self._files_dir())
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
        return SnsService(self.settings, self.store, self.root.destinations.send, self.functions.endpoint_url)

    def _make_sns_app(self) -> Any:
        from .sns.api import sns_app
        return sns_app(self.sns)

    def _cloudformation(self) -> tuple[Any, Any]:
        from .cloudformation.api import cloudformation_app
        from .cloudformation.service import CloudFormationService
        from .functions.runtimes import runnable as runnable_runtimes
        service = CloudFormationService(self.settings, self.store, self.root.read_object,
                                        lambda: self.functions.endpoint_url, self._credentials, runnable_runtimes)
        return service, cloudformation_app(service)

    def close(self) -> None:
        """Stop what was started; a service never made has nothing to stop."""
        self.sweeper.stop()
        services = {prefix: lazy.if_made() for prefix, lazy in self._lazy_services.items()}
        for made in (self._sns.if_made(), services["Firehose_20150804"]):
            if made is not None:
                made.close()
        self.channel_delivery.close()
        for made in (services["Logs_20140328"], services["AmazonSQS"], self._functions.if_made()):
            if made is not None:
                made.close()
        self.kinesis.close()

    # Reset (`Services.reset`): the part of each service that is this scope's

    def made_of(self, name: str) -> Any:
        """The service of that name if it was made (None: it has nothing to stop)."""
        if name == "kinesis":
            return self.kinesis
        if name == "cloudformation":
            return self.cloudformation.service if self.cloudformation.made else None
        return self._lazy_of(name).if_made()

    def _lazy_of(self, name: str) -> Lazy:
        return {"lambda": self._functions, "sns": self._sns}.get(name) or self._lazy_services[TARGET_PREFIXES[name]]

    def close_for_reset(self, name: str, made: Any) -> None:
        """Stop the background work of a service of this scope, as `close` stops it."""
        if name == "kinesis":
            self.channel_delivery.close()
            self.sweeper.stop()
        if name != "cloudformation":
            getattr(made, "close", lambda: None)()

    def remake(self, name: str) -> Any:
        """Have the service of that name made anew (Kinesis at once, the others on first use);
        what was made until now, if anything."""
        if name == "kinesis":
            self._start_kinesis()
            return None
        if name == "cloudformation":
            return self.cloudformation.forget()
        app = {"lambda": self.lambda_rest, "sns": self.sns_app}.get(name)
        if app is not None:
            app.forget()
            return self._lazy_of(name).forget()
        return self.services[TARGET_PREFIXES[name]].forget()  # the stand-in forgets its cached methods


def _checked(service: Any, target_prefix: str) -> Any:
    """`service`, made for the stand-in routed by `target_prefix`, whose prefix it must have."""
    if service.target_prefix != target_prefix:
        raise RuntimeError(f"{type(service).__name__} answers {service.target_prefix}, not {target_prefix}")
    return service
