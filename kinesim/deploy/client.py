"""`kinesim deploy` as a client of the server's CloudFormation API, as `sam deploy` and
`aws cloudformation deploy` are: the template is linted, built and packaged here (local code
uploaded to S3), then a change set is created and executed on the server; its lines (one per
resource) are followed until the stack is settled.

What it does for its users that those tools leave to them: capabilities are granted (kinesim does
not check permissions), parameters not overridden keep their previous values, and a stack whose
creation failed (ROLLBACK_COMPLETE, which CloudFormation can only delete) is deleted and created
anew, as `sam deploy` does.
"""
from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from .package import artifacts_bucket, package_template
from .resources import Target
from .template import DeployError, TemplateError, inline_includes, lint, load_template, parameter_values

CAPABILITIES = ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"]
SETTLED = ("CREATE_COMPLETE", "UPDATE_COMPLETE", "ROLLBACK_COMPLETE", "UPDATE_ROLLBACK_COMPLETE", "ROLLBACK_FAILED",
           "UPDATE_ROLLBACK_FAILED", "DELETE_FAILED", "DELETE_COMPLETE")
NO_CHANGES = "The submitted information didn't contain changes"
MAX_TEMPLATE_BODY = 51_200
POLL_S = 0.1
# How long a stack operation may take before the client gives up following it (the server goes on).
FOLLOW_TIMEOUT_S = 30 * 60


class StackClient:
    def __init__(self, target: Target, endpoint_url: str, echo: Any = print):
        self.target = target
        self.cfn = target.cloudformation
        self.endpoint_url = endpoint_url.rstrip("/")
        self.echo = echo
        self.name = target.stack_name

    def _call(self, operation: str, **params: Any) -> dict[str, Any]:
        try:
            return getattr(self.cfn, operation)(**params)
        except ClientError as err:
            raise DeployError(err.response.get("Error", {}).get("Message") or str(err)) from None
        except BotoCoreError as err:
            raise DeployError(f"cannot reach kinesim at {self.endpoint_url} ({err}); is `kinesim serve` running? "
                              "(--endpoint-url or AWS_ENDPOINT_URL choose the server)") from None

    def stack(self) -> dict[str, Any] | None:
        try:
            return self.cfn.describe_stacks(StackName=self.name)["Stacks"][0]
        except ClientError as err:
            if "does not exist" in (err.response.get("Error", {}).get("Message") or ""):
                return None
            raise DeployError(str(err)) from None

    # deploy

    def deploy(self, path: Path, overrides: dict[str, str], run_lint: bool = True) -> None:
        template = self._packaged(path, overrides, run_lint)
        stack = self.stack()
        if stack is not None and stack["StackStatus"] == "ROLLBACK_COMPLETE":
            # CloudFormation refuses to update a stack whose creation rolled back (it can only be
            # deleted); `sam deploy` deletes such a stack for its users (samcli/lib/deploy/
            # deployer.py, rollback_delete_stack). So does this.
            self.echo(f"Stack {self.name} is ROLLBACK_COMPLETE (its creation failed): deleting it and creating it anew")
            self.delete()
            stack = None
        creating = stack is None or stack["StackStatus"] == "REVIEW_IN_PROGRESS"
        previous = {p["ParameterKey"] for p in (stack or {}).get("Parameters", [])}
        parameters = [{"ParameterKey": k, "ParameterValue": v} for k, v in overrides.items()]
        # As `aws cloudformation deploy`: a parameter not overridden keeps its previous value.
        parameters += [{"ParameterKey": k, "UsePreviousValue": True} for k in sorted(previous - set(overrides))
                       if k in (template.get("Parameters") or {})]
        change_set_name = f"kinesim-deploy-{int(time.time() * 1000)}"
        created = self._call("create_change_set", StackName=self.name, ChangeSetName=change_set_name,
                             ChangeSetType="CREATE" if creating else "UPDATE", Capabilities=CAPABILITIES,
                             Parameters=parameters, **self._template_argument(template))
        change_set = self._call("describe_change_set", ChangeSetName=created["Id"])
        if change_set["Status"] == "FAILED":
            self._call("delete_change_set", ChangeSetName=created["Id"])
            if NO_CHANGES in change_set.get("StatusReason", ""):
                self._unchanged()
                return
            if creating:  # nothing was made: the stack the change set was to create goes too
                self._follow_call("delete_stack", StackName=created["StackId"])
            raise DeployError(change_set.get("StatusReason") or "the change set failed")
        final = self._follow_call("execute_change_set", ChangeSetName=created["Id"])
        if final["StackStatus"] not in ("CREATE_COMPLETE", "UPDATE_COMPLETE"):
            raise DeployError(self._failure or final.get("StackStatusReason") or final["StackStatus"])
        outputs = final.get("Outputs") or []
        if outputs and not self._printed_outputs:
            self._print_outputs(outputs)

    def _packaged(self, path: Path, overrides: dict[str, str], run_lint: bool) -> dict[str, Any]:
        """The template as the server is sent it: linted, snippets inlined, built, code in S3."""
        from .build import built
        template = load_template(path)
        if run_lint:
            errors = lint(path, self.target.region)
            if errors:
                raise TemplateError(f"{path.name} has {len(errors)} error(s) (cfn-lint; --no-lint skips this check):"
                                    "\n  " + "\n  ".join(errors))
        s3 = self.target.s3
        template = inline_includes(template, path.parent,
                                   lambda bucket, key: s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        try:
            parameters = parameter_values(template, overrides)
        except TemplateError:
            parameters = {}  # the server names what is wrong; the build needs only resolvable values
        template = built(template, path.parent, parameters, self.target.region)
        try:
            return package_template(template, path.parent, s3,
                                    artifacts_bucket(self.target.account_id, self.target.region),
                                    self.endpoint_url)
        except (ClientError, BotoCoreError) as err:
            raise DeployError(f"uploading the code to kinesim's S3 failed: {err}") from None

    def _template_argument(self, template: dict[str, Any]) -> dict[str, str]:
        body = json.dumps(template)
        if len(body.encode()) <= MAX_TEMPLATE_BODY:
            return {"TemplateBody": body}
        bucket = artifacts_bucket(self.target.account_id, self.target.region)
        key = f"templates/{self.name}-{int(time.time() * 1000)}.json"
        self.target.s3.put_object(Bucket=bucket, Key=key, Body=body.encode())
        return {"TemplateURL": f"{self.endpoint_url}/{bucket}/{urllib.parse.quote(key)}"}

    def _unchanged(self) -> None:
        resources = self._call("list_stack_resources", StackName=self.name)["StackResourceSummaries"]
        for resource in resources:
            self.echo(f"{'unchanged':<10} {resource['LogicalResourceId']:<32} {resource['ResourceType']:<32} "
                      f"{resource.get('PhysicalResourceId') or '-'}")
        outputs = (self.stack() or {}).get("Outputs") or []
        if outputs:
            self._print_outputs(outputs)

    def _print_outputs(self, outputs: list[dict[str, Any]]) -> None:
        self.echo("Outputs:")
        width = max(len(o["OutputKey"]) for o in outputs)
        for output in outputs:
            self.echo(f"  {output['OutputKey']:<{width}}  {output.get('OutputValue', '')}")

    # following an operation

    _failure: str | None = None
    _printed_outputs = False

    def _follow_call(self, operation: str, **params: Any) -> dict[str, Any]:
        """Make a call that starts a stack operation, and follow the operation while the call is
        answered (the server answers once the operation ends, or after a while if it goes on)."""
        before = (self._log(0) or {}).get("OperationId")
        failure: list[DeployError] = []

        def call() -> None:
            try:
                self._call(operation, **params)
            except DeployError as err:
                failure.append(err)

        caller = threading.Thread(target=call, daemon=True)
        caller.start()
        final = self._follow(before, caller, failure)
        caller.join()
        if failure:
            raise failure[0]
        return final

    def _follow(self, before: str | None, caller: threading.Thread, failure: list[DeployError]) -> dict[str, Any]:
        """Print the operation's lines as the server writes them; the stack once it has settled.
        `before` is the stack's previous operation, whose lines are not this one's."""
        since = 0
        deadline = time.monotonic() + FOLLOW_TIMEOUT_S
        while time.monotonic() < deadline:
            if failure:
                raise failure[0]
            view = self._log(since)
            if view is not None and view["OperationId"] == before:
                view = None if caller.is_alive() else view  # not started yet (or the call started nothing)
            if view is not None and view["OperationId"] != before:
                for line in view["Lines"]:
                    self.echo(line)
                    self._printed_outputs = self._printed_outputs or line == "Outputs:"
                since = view["Next"]
                self._failure = view.get("Error")
            if (view is None and not caller.is_alive()) or (view is not None and view["Done"]):
                stack = self.stack()
                if stack is None:
                    return {"StackStatus": "DELETE_COMPLETE"}
                if stack["StackStatus"] in SETTLED or stack["StackStatus"] == "REVIEW_IN_PROGRESS":
                    return stack
            time.sleep(POLL_S)
        raise DeployError(f"stack {self.name} has not settled after {FOLLOW_TIMEOUT_S} s; the server carries on "
                          f"(aws cloudformation describe-stack-events --stack-name {self.name} shows how far it is)")

    def _log(self, since: int) -> dict[str, Any] | None:
        where = urllib.parse.urlencode({"since": since, "account": self.target.account_id,
                                        "region": self.target.region})
        url = f"{self.endpoint_url}/_kinesim/stacks/{urllib.parse.quote(self.name, safe='')}/log?{where}"
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as err:
            if err.code == 404:
                return None
            raise DeployError(f"kinesim at {self.endpoint_url} refused to show stack {self.name}'s progress: "
                              f"HTTP {err.code}") from None
        except OSError as err:
            raise DeployError(f"cannot reach kinesim at {self.endpoint_url} ({err})") from None

    # delete

    def delete(self) -> bool:
        """Delete the stack and wait for it to be gone; False if there was none."""
        if self.stack() is None:
            return False
        final = self._follow_call("delete_stack", StackName=self.name)
        if final["StackStatus"] != "DELETE_COMPLETE":
            raise DeployError(self._failure or final.get("StackStatusReason") or final["StackStatus"])
        return True
