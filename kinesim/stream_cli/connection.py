"""What `kinesim put` and `kinesim tail` share: the endpoint options, a boto3 Kinesis client for
them, and error messages that tell the user what to do next."""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

DEFAULT_ENDPOINT = "http://localhost:4566"


class CommandError(Exception):
    """A problem the user can fix; the message says how."""


def positive_int(text: str) -> int:
    """argparse type: a count of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: must be at least 1")
    return value


def add_endpoint_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--endpoint-url", default=os.environ.get("AWS_ENDPOINT_URL") or DEFAULT_ENDPOINT, metavar="URL",
                        help=f"the kinesim server (default: $AWS_ENDPOINT_URL, else {DEFAULT_ENDPOINT})")
    parser.add_argument("--region", default=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
                        or "us-east-1", help="the region to sign requests for (default: $AWS_REGION, "
                                             "$AWS_DEFAULT_REGION, else us-east-1)")


def kinesis_client(args: argparse.Namespace, attempts: int = 3) -> Any:
    """A Kinesis client for --endpoint-url. `attempts` counts botocore's own retries of throttled
    calls and dropped connections; 1 for a first call that should fail fast when nobody listens."""
    session = boto3.Session(region_name=args.region)
    # kinesim accepts any credentials; a machine without an AWS profile works all the same.
    credentials = {} if session.get_credentials() else {"aws_access_key_id": "test", "aws_secret_access_key": "test"}
    config = Config(retries={"mode": "standard", "max_attempts": attempts}, connect_timeout=5, read_timeout=30)
    return session.client("kinesis", endpoint_url=args.endpoint_url, config=config, **credentials)


def describe_stream(args: argparse.Namespace, stream: str) -> dict[str, Any]:
    """The stream's StreamDescriptionSummary once it can be read and written (a stream being created
    is waited for), or a CommandError saying what is wrong."""
    client = kinesis_client(args, attempts=1)
    deadline = time.monotonic() + 60
    while True:
        try:
            summary = client.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]
        except (ClientError, BotoCoreError) as err:
            raise explain(err, args.endpoint_url, stream) from None
        if summary["StreamStatus"] == "DELETING":
            raise CommandError(f"stream {stream!r} on {args.endpoint_url} is being deleted")
        if summary["StreamStatus"] != "CREATING":
            return summary
        if time.monotonic() > deadline:
            raise CommandError(f"stream {stream!r} on {args.endpoint_url} is still CREATING after 60 s")
        time.sleep(0.1)


def explain(err: Exception, endpoint: str, stream: str) -> CommandError:
    """The user's next step for a failed call."""
    if isinstance(err, EndpointConnectionError):
        return CommandError(f"cannot reach kinesim at {endpoint}; is `kinesim serve` running? "
                            f"(or pass --endpoint-url / set AWS_ENDPOINT_URL)")
    if isinstance(err, ClientError):
        code = err.response.get("Error", {}).get("Code", "")
        if code == "ResourceNotFoundException":
            return CommandError(f"stream {stream!r} does not exist on {endpoint}; create it with "
                                f"`aws --endpoint-url {endpoint} kinesis create-stream --stream-name {stream} "
                                f"--shard-count 1` or `kinesim deploy`")
        return CommandError(f"{err.operation_name} on stream {stream!r} at {endpoint} failed: {code}: "
                            f"{err.response.get('Error', {}).get('Message', '')}")
    return CommandError(f"call to kinesim at {endpoint} failed: {err}")


def fail(command: str, err: CommandError) -> int:
    print(f"kinesim {command}: {err}", file=sys.stderr)
    return 1
