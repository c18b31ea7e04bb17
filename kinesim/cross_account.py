"""Calls into another account's resources, as resource-based policies allow them (issue 34).

A request is served by its own account's services (`scopes.py`). A call that names a resource of
another account in the same region, by ARN or queue URL, is served by that account's service when
the resource's policy allows the caller the action, and refused with the service's AccessDenied
otherwise, as AWS does. Calls within one account are not checked: kinesim enforces no identity
policies, and a resource policy only matters where it is the one that grants access.

- Kinesis: a StreamARN, ConsumerARN or ResourceARN parameter; the stream's or the consumer's
  policy (PutResourcePolicy; Kinesis has had them since November 2023). A stream's resource
  policy itself is managed only from its own account (PutResourcePolicy, API reference).
- SQS: a QueueUrl of another account (`<endpoint>/<account>/<name>`), or GetQueueUrl with
  QueueOwnerAWSAccountId; the queue's `Policy` attribute.
- SNS: a TopicArn or TargetArn of another account (Publish, Subscribe, ...); the topic's `Policy`
  attribute (its default one lets only its own account in).
- Lambda: a function ARN of another account in the path of Lambda's REST API (Invoke, GetFunction,
  ...); the function's policy (AddPermission), of its version or alias when the call names one.

Who the caller is (`caller`): the identity GetCallerIdentity would answer for the credentials
the request is signed with: an assumed role's session, an IAM user, else the account's root.
"""
from __future__ import annotations

import io
import re
from typing import Any, Callable
from urllib.parse import parse_qs, unquote

from .iam.evaluate import Caller, allows, denied_message
from .protocol.errors import AwsError
from .scopes import SERVED_BY, Scope, credential, is_account
from .sqs.errors import queue_does_not_exist

# Only the owner manages a stream's or consumer's policy (PutResourcePolicy's API reference).
_OWNER_ONLY = frozenset(("PutResourcePolicy", "GetResourcePolicy", "DeleteResourcePolicy"))
# Lambda's REST paths that name a function, and the action each is authorized as.
_FUNCTION_PATH = re.compile(r"/\d{4}-\d{2}-\d{2}/functions/([^/]+)(/[^?]*)?")
_LAMBDA_ACTIONS = {("POST", "/invocations"): "InvokeFunction", ("POST", "/invoke-async"): "InvokeAsync",
                   ("POST", "/response-streaming-invocations"): "InvokeFunction",
                   ("GET", ""): "GetFunction", ("GET", "/configuration"): "GetFunctionConfiguration",
                   ("GET", "/policy"): "GetPolicy", ("GET", "/versions"): "ListVersionsByFunction",
                   ("GET", "/aliases"): "ListAliases"}
_SNS_MAX_BYTES = 4 * 1024 * 1024  # SNS's query app's own bound
_ASSUMED = re.compile(r"arn:([^:]+):sts::(\d{12}):assumed-role/([^/]+)/.+")


class CrossAccount:
    def __init__(self, root: Any):
        self.root = root  # services.Services: scopes, STS, IAM

    def caller(self, environ: dict[str, Any], scope: Scope) -> Caller:
        parts = credential(environ)
        key = parts[0] if parts else None
        identity = None
        if key and key.startswith("ASIA"):
            issued = self.root.sts.credentials.lookup(key)
            identity = issued["identity"] if issued else None
        elif key and key.startswith("AKIA"):
            identity = self.root.account(scope.account).principals.key_identity(key)
        arn = identity["Arn"] if identity else f"arn:{scope.partition}:iam::{scope.account}:root"
        m = _ASSUMED.fullmatch(arn)
        role = None
        if m:  # the session's role, as a policy names it (its path, when IAM has the role)
            known = self.root.account(m.group(2)).principals.role_by_name(m.group(3))
            role = known["Arn"] if known else f"arn:{m.group(1)}:iam::{m.group(2)}:role/{m.group(3)}"
        return Caller(scope.account, arn, role)

    def json_service(self, environ: dict[str, Any], prefix: str, op: str, params: dict[str, Any],
                     service: Any) -> Any:
        """The service that serves a JSON call: the caller's own, or the owner's of the resource
        it names when that is another account's and its policy allows the call."""
        if prefix == "Kinesis_20131202":
            # the data plane's path: most calls name their stream by name, and nothing else is done
            arn = params.get("ConsumerARN") or params.get("StreamARN") or params.get("ResourceARN")
            return service if arn is None else self._kinesis(environ, op, arn, service)
        if prefix == "AmazonSQS":
            return self._sqs(environ, op, params, service)
        return service

    def _check(self, environ: dict[str, Any], scope: Scope, policy: Any, action: str, resource: str,
               refusal: Callable[[Caller], Exception]) -> None:
        """Raise the service's `refusal` unless the resource's policy allows the caller the action."""
        caller = self.caller(environ, scope)
        if policy is None or not allows(policy, caller, action, resource):
            raise refusal(caller)

    def _owner(self, environ: dict[str, Any], account: str) -> tuple[Scope, Any] | None:
        """The caller's scope and the owner's services in the caller's region, when `account` is
        another account whose services exist (None: the call is the caller's own to answer)."""
        scope = self.root.resolve(environ)
        if account == scope.account or not is_account(account):
            return None
        return scope, self.root.existing_scope(Scope(account, scope.region))

    def lambda_call(self, environ: dict[str, Any]) -> None:
        """Have a call of Lambda's REST API that names another account's function served by that
        account's Lambda (`SERVED_BY`) if the function's policy allows it; AccessDeniedException if not."""
        m = _FUNCTION_PATH.fullmatch(environ.get("PATH_INFO", ""))
        ref = unquote(m.group(1)) if m else ""
        parts = ref.split(":")
        if len(parts) < 7 or parts[0] != "arn" or parts[2] != "lambda":
            return
        found = self._owner(environ, parts[4])
        if found is None or parts[3] != found[0].region:
            return  # another region's function: the caller's Lambda answers that it has none
        scope, owner = found
        op = _LAMBDA_ACTIONS.get((environ.get("REQUEST_METHOD", ""), (m.group(2) or "").rstrip("/")))
        qualifier = parse_qs(environ.get("QUERY_STRING", "")).get("Qualifier", [None])[0]
        action = f"lambda:{op or 'UpdateFunctionConfiguration'}"
        policy = owner.functions.resource_policy(ref, qualifier) if owner is not None and op else None
        self._check(environ, scope, policy, action, ref if not qualifier else f"{ref}:{qualifier}",
                    lambda caller: AwsError("AccessDeniedException", denied_message(caller.arn, action, ref), 403))
        environ[SERVED_BY] = owner.scope

    def sns_call(self, environ: dict[str, Any]) -> None:
        """Have an SNS call that names another account's topic served by that account's SNS
        (`SERVED_BY`) if the topic's policy allows it; AuthorizationError if not. The form body is
        read here, and put back for the query app to read."""
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return
        if environ.get("REQUEST_METHOD") != "POST" or not 0 < length <= _SNS_MAX_BYTES:
            return
        body = environ["wsgi.input"].read(length)
        environ["wsgi.input"] = io.BytesIO(body)
        params = parse_qs(body.decode("utf-8", "replace"))
        arn = (params.get("TopicArn") or params.get("TargetArn") or [""])[0]
        parts = arn.split(":")
        if len(parts) != 6 or parts[2] != "sns":
            return
        found = self._owner(environ, parts[4])
        if found is None or parts[3] != found[0].region:
            return  # another region's topic: the caller's SNS answers as AWS does
        scope, owner = found
        # SNS's actions are written in capitals in its policies (its default policy's "SNS:Publish")
        action = f"SNS:{params.get('Action', [''])[0]}"
        policy = owner.sns.topic_policy(arn) if owner is not None else None
        self._check(environ, scope, policy, action, arn,
                    lambda caller: AwsError("AuthorizationError", denied_message(caller.arn, action, arn), 403))
        environ[SERVED_BY] = owner.scope

    def _kinesis(self, environ: dict[str, Any], op: str, arn: Any, service: Any) -> Any:
        parts = arn.split(":", 5) if isinstance(arn, str) else []
        if len(parts) != 6 or parts[2] != "kinesis":
            return service
        found = self._owner(environ, parts[4])
        if found is None or parts[3] != found[0].region:
            return service  # another region's ARN: the caller's Kinesis answers that it has no such stream
        scope, owner = found
        action = f"kinesis:{op}"
        policy = owner.kinesis.policies.get(arn) if owner is not None and op not in _OWNER_ONLY else None
        self._check(environ, scope, policy, action, arn,
                    lambda caller: AwsError("AccessDeniedException", denied_message(caller.arn, action, arn), 400))
        return owner.services["Kinesis_20131202"]

    def _sqs(self, environ: dict[str, Any], op: str, params: dict[str, Any], service: Any) -> Any:
        if op == "GetQueueUrl":
            account, name = params.get("QueueOwnerAWSAccountId"), params.get("QueueName")
        else:
            url = params.get("QueueUrl")
            segments = [s for s in url.split("?")[0].split("/") if s] if isinstance(url, str) else []
            account, name = (segments[-2], segments[-1]) if len(segments) >= 2 else (None, None)
        if not isinstance(account, str) or not isinstance(name, str):
            return service
        found = self._owner(environ, account)
        if found is None:
            return service
        scope, owner = found
        policy = owner.sqs.queue_policy(name) if owner is not None else None
        arn = f"arn:{scope.partition}:sqs:{scope.region}:{account}:{name}"

        def refusal(caller: Caller) -> Exception:
            if op == "GetQueueUrl":  # AWS does not tell a queue it may not see from a missing one
                return queue_does_not_exist()
            # SQS's answer to a call its policies do not allow (the text of AWS's, as SDK issues quote it)
            return AwsError("AccessDenied", f"Access to the resource https://sqs.{scope.region}.amazonaws.com/ "
                                            "is denied.", 403)
        self._check(environ, scope, policy, f"sqs:{op}", arn, refusal)
        return owner.sqs
