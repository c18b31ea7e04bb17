"""`kinesim deploy TEMPLATE`: make a kinesim server's resources match a CloudFormation/SAM template."""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any


from .template import DeployError

if TYPE_CHECKING:
    from .resources import Target

DEFAULT_ENDPOINT = "http://localhost:4566"
STACK_NAME = re.compile(r"[a-zA-Z][-a-zA-Z0-9]{0,127}")

DESCRIPTION = """\
Deploy a CloudFormation or SAM template (Transform: AWS::Serverless-2016-10-31) to a kinesim
server, the way `sam build` and `sam deploy` deploy to AWS: Kinesis streams, Lambda functions
(each CodeUri directory is built, zipped and uploaded) and their event source mappings, Firehose
delivery streams (to S3), S3 buckets and IAM roles and policies are created through the same APIs
a client uses. IAM stores roles and policies but does not enforce them: kinesim does not check
permissions.

The server deploys it: kinesim serves the CloudFormation API, and `kinesim deploy` is a client of
it, as `sam deploy` and `aws cloudformation deploy` are (code is uploaded to a
kinesim-deploy-artifacts-ACCOUNT-REGION bucket, then a change set is created and executed). Stacks
made with those tools and with `kinesim deploy` are the same stacks.

Deploying again updates the stack in place: unchanged resources are left alone, changed ones are
updated (or replaced when CloudFormation would replace them, e.g. a new stream Name), and
resources no longer in the template are deleted. Parameters not overridden keep their previous
values, as with `aws cloudformation deploy`. The stack lives on the server, with its data. One
line is printed per resource with its action as the server works, then the stack's Outputs.

Before anything is changed, the template is checked with cfn-lint (offline): a misspelt
property or a bad !GetAtt is reported with the resource and property it is in. Then everything
kinesim cannot deploy (types of services it does not emulate, runtimes the server cannot run,
unsupported properties) is reported at once. AWS::Include snippets (local files or s3://) are
inlined first.

Functions are built first, as `sam build` builds them: a CodeUri with a requirements.txt gets its
packages installed with pip (wheels for the function's Python version), one with a package.json
its production dependencies with npm, and a layer with Metadata BuildMethod likewise; a Node.js
function with Metadata BuildMethod esbuild is bundled by esbuild with its BuildProperties. Builds are
cached by content ($XDG_CACHE_HOME/kinesim/build, else ~/.cache/kinesim/build): an unchanged
function is not built again. Code that needs no build, and code sam build already built
(.aws-sam/build/), deploy as they are; --no-build deploys every directory as it is.

Without a template argument, the template is found as `sam deploy` finds it: sam build's
.aws-sam/build/template.yaml, else template.yaml, template.yml or template.json.

A failed deploy rolls back as CloudFormation does: a new stack's resources are deleted again
(ROLLBACK_COMPLETE; the next deploy creates the stack anew), an update's changes are undone
(UPDATE_ROLLBACK_COMPLETE). Resources removed from the template are deleted only once the rest
succeeded.
"""

EPILOG = """\
examples:
  kinesim deploy template.yaml
  kinesim deploy                        # .aws-sam/build/template.yaml or template.yaml, as sam deploy
  kinesim deploy template.yaml --no-build
  kinesim deploy template.yaml --parameter-overrides ShardCount=4
  kinesim deploy infra/app.yaml --stack-name clicks --endpoint-url http://localhost:4566
  kinesim deploy template.yaml --delete
"""


def configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add deploy's arguments to `parser` (a subcommand's parser, or a parser of its own)."""
    parser.add_argument("template", type=Path, nargs="?",
                        help="the template file (YAML or JSON; default: as sam deploy, .aws-sam/build/template.yaml "
                             "if sam build made one, else template.yaml, template.yml or template.json)")
    parser.add_argument("--stack-name", help="the stack to create or update (default: the name of the "
                                             "template's directory; the project's for sam build's "
                                             ".aws-sam/build/template.yaml)")
    parser.add_argument("--parameter-overrides", nargs="+", default=[], metavar="KEY=VALUE",
                        help="template parameter values, as KEY=VALUE or ParameterKey=KEY,ParameterValue=VALUE")
    parser.add_argument("--endpoint-url", default=os.environ.get("AWS_ENDPOINT_URL") or DEFAULT_ENDPOINT,
                        help=f"the kinesim server (default: $AWS_ENDPOINT_URL, else {DEFAULT_ENDPOINT})")
    parser.add_argument("--region", help="the region to deploy into, the value of AWS::Region (default: "
                                         "$AWS_REGION, $AWS_DEFAULT_REGION, else the server's --region); the "
                                         "account is that of the credentials, as for the AWS CLI")
    parser.add_argument("--delete", action="store_true",
                        help="delete the stack and every resource it made, dependents first")
    parser.add_argument("--no-lint", dest="lint", action="store_false",
                        help="skip the cfn-lint check of the template")
    parser.add_argument("--no-build", dest="build", action="store_false",
                        help="deploy code directories as they are, without installing their requirements.txt or "
                             "package.json dependencies")
    return parser


def parser() -> argparse.ArgumentParser:
    return configure(argparse.ArgumentParser(prog="kinesim deploy", description=DESCRIPTION, epilog=EPILOG,
                                             formatter_class=argparse.RawDescriptionHelpFormatter,
                                             allow_abbrev=False))


def main(argv: list[str] | None = None) -> int:
    return run(parser().parse_args(argv))


def run(args: argparse.Namespace) -> int:
    try:
        overrides = parse_overrides(args.parameter_overrides)
        if args.stack_name is not None and not STACK_NAME.fullmatch(args.stack_name):
            raise DeployError(f"1 validation error detected: Value '{args.stack_name}' at 'stackName' failed to "
                              "satisfy constraint: Member must satisfy regular expression pattern: "
                              "[a-zA-Z][-a-zA-Z0-9]*|arn:[-a-zA-Z0-9:/._+]*")
        # --delete with --stack-name needs no template; else the one named or sam deploy's default.
        args.template = Path("template.yaml") if args.template is None and args.delete and args.stack_name \
            else find_template(args.template)
        health = server_settings(args.endpoint_url)
        target = make_target(args, health)
        # Imported here, not at the top: every `kinesim` command builds deploy's parser.
        from .client import StackClient
        stacks = StackClient(target, args.endpoint_url)
        if args.delete:
            print(f"Stack {target.stack_name} deleted" if stacks.delete()
                  else f"Stack {target.stack_name} does not exist: nothing to delete")
            return 0
        if not args.template.is_file():
            raise DeployError(f"Template file {args.template} does not exist")
        if args.build:
            from .build import Builder, session
            note_built_template(args.template)
            with session(Builder()):
                stacks.deploy(args.template, overrides, run_lint=args.lint)
        else:
            stacks.deploy(args.template, overrides, run_lint=args.lint)
        print(f"Stack {target.stack_name} deployed to {args.endpoint_url}")
        return 0
    except DeployError as err:
        print(f"Error: {err}", file=sys.stderr)
        return 1


# Where `sam deploy` looks for a template it is not given, in order (samcli/commands/_utils/
# options.py, get_or_default_template_file_name): sam build's output first.
BUILT_TEMPLATE = Path(".aws-sam", "build", "template.yaml")
DEFAULT_TEMPLATES = (BUILT_TEMPLATE, Path("template.yaml"), Path("template.yml"), Path("template.json"))


def find_template(given: Path | None) -> Path:
    """The template named, else the first of sam deploy's defaults in the current directory."""
    if given is not None:
        return given
    for candidate in DEFAULT_TEMPLATES:
        if candidate.is_file():
            return candidate
    raise DeployError("no template given, and none of " + ", ".join(map(str, DEFAULT_TEMPLATES))
                      + " is in the current directory")


def project_template(template: Path) -> Path:
    """The project's template for a template sam build wrote (PROJECT/.aws-sam/build/template.yaml):
    both name the same stack by default."""
    resolved = template.resolve()
    if resolved.parent.name == "build" and resolved.parent.parent.name == ".aws-sam":
        return resolved.parent.parent.parent / "template.yaml"
    return template


def note_built_template(template: Path) -> None:
    """A named template is deployed as named (as `sam deploy --template-file` does) even when sam
    build's output is next to it; say so, since the two may differ."""
    built = template.resolve().parent / BUILT_TEMPLATE
    if project_template(template) == template and built.is_file():
        print(f"Note: deploying {template} (built here); sam build's {BUILT_TEMPLATE} next to it is deployed by "
              "`kinesim deploy` without a template argument")


def parse_overrides(items: list[str]) -> dict[str, str]:
    overrides = {}
    for item in items:
        if item.startswith("ParameterKey="):
            fields = dict(part.split("=", 1) for part in item.split(",", 1) if "=" in part)
            key, value = fields.get("ParameterKey"), fields.get("ParameterValue")
        else:
            key, _, value = item.partition("=")
            value = value if "=" in item else None
        if not key or value is None:
            raise DeployError(f"--parameter-overrides takes KEY=VALUE, not {item!r}")
        overrides[key] = value
    return overrides


def server_settings(endpoint_url: str) -> dict[str, Any]:
    """The server's region and account id, from its health document (empty if it does not say)."""
    try:
        with urllib.request.urlopen(endpoint_url.rstrip("/") + "/_kinesim/health", timeout=10) as response:
            return json.loads(response.read())
    except OSError as err:
        raise DeployError(f"cannot reach kinesim at {endpoint_url} ({err}); is `kinesim serve` running? "
                          "(--endpoint-url or AWS_ENDPOINT_URL choose the server)") from None


def make_target(args: argparse.Namespace, health: dict[str, Any] | None = None) -> Target:
    import boto3

    from kinesim.config import partition_of
    from .resources import service_clients, target_for
    from .stack import stack_name_for
    health = server_settings(args.endpoint_url) if health is None else health
    # The region and account the stack goes into are those of the credentials, as for the AWS CLI
    # (kinesim keeps each apart): the region from --region or the environment, else the server's.
    region = args.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") \
        or health.get("region") or "us-east-1"
    # kinesim accepts any credentials; a machine without an AWS profile can deploy all the same.
    credentials = {} if boto3.Session(region_name=region).get_credentials() \
        else {"aws_access_key_id": "test", "aws_secret_access_key": "test"}
    clients = service_clients(args.endpoint_url, region, credentials)
    account = boto3.Session(region_name=region).client("sts", endpoint_url=args.endpoint_url, **credentials) \
        .get_caller_identity()["Account"]
    return target_for(clients, stack_name=args.stack_name or stack_name_for(project_template(args.template)),
                      region=region, account_id=account, partition=partition_of(region))


if __name__ == "__main__":
    sys.exit(main())
