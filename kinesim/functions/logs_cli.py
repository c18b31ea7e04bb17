"""`kinesim logs FUNCTION`: print what a function logged (START / its output / END / REPORT), like
`aws logs tail /aws/lambda/FUNCTION` does against CloudWatch; `--follow` keeps printing.

It reads through the CloudWatch Logs API (FilterLogEvents), the calls `aws logs tail` makes, so it
shows what any Logs client sees: retention applies, a deleted log group is gone. A name that
starts with `/` is taken as any log group's name."""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from datetime import datetime, timezone

from ..stream_cli import reader_gone

DEFAULT_ENDPOINT = "http://localhost:4566"
_SINCE = re.compile(r"(\d+)([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_POLL_S = 0.5


def configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("function", help="the function's name (or a log group's name, starting with /)")
    parser.add_argument("-f", "--follow", action="store_true", help="keep printing new lines until Ctrl-C")
    # `aws logs tail` starts 10 minutes back too: a function logging for days prints a screenful.
    parser.add_argument("--since", default="10m", help="how far back to start: 30s, 10m, 2h, 1d (default 10m, "
                                                       "as `aws logs tail`); 'all' for everything kept")
    parser.add_argument("--filter-pattern", help="a CloudWatch Logs filter pattern: ERROR, '?ERROR ?WARN', "
                                                 "'{ $.level = \"error\" }', ...")
    parser.add_argument("--timestamps", action="store_true", help="prefix each line with its UTC time and log stream")
    parser.add_argument("--endpoint-url", default=os.environ.get("AWS_ENDPOINT_URL") or DEFAULT_ENDPOINT,
                        help=f"the kinesim server (default: $AWS_ENDPOINT_URL, else {DEFAULT_ENDPOINT})")
    parser.add_argument("--region", default=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
                        or "us-east-1", help="the function's region (default: $AWS_REGION, $AWS_DEFAULT_REGION, "
                                             "else us-east-1); its account is that of your credentials")
    return parser


def since_ms(text: str, now: float | None = None) -> int:
    if text == "all":
        return 0
    match = _SINCE.fullmatch(text)
    if not match:
        raise ValueError(f"--since {text!r}: use a number and a unit, e.g. 30s, 10m, 2h, 1d, or 'all'")
    now = time.time() if now is None else now
    return int((now - int(match[1]) * _UNITS[match[2]]) * 1000)


def _clients(endpoint: str, region: str) -> tuple:
    import boto3
    from botocore.config import Config

    # The caller's credentials, which say the account (kinesim checks a signature's shape, not its
    # secret: without any, those of the server's own account).
    session = boto3.Session(region_name=region)
    credentials = {} if session.get_credentials() else {"aws_access_key_id": "kinesim",
                                                        "aws_secret_access_key": "kinesim"}
    kw = dict(endpoint_url=endpoint, config=Config(retries={"max_attempts": 1}), **credentials)
    return session.client("logs", **kw), session.client("lambda", **kw)


def _missing(lam, name: str, endpoint: str) -> str | None:
    """Why there is nothing to read: None when the function exists (it has not logged yet)."""
    if name.startswith("/"):
        return f"log group {name!r} does not exist on {endpoint}"
    try:
        lam.get_function_configuration(FunctionName=name)
        return None
    except lam.exceptions.ResourceNotFoundException:
        return (f"function {name!r} does not exist on {endpoint} "
                f"(list them with: aws --endpoint-url {endpoint} lambda list-functions)")


def run(args: argparse.Namespace, out=sys.stdout) -> int:
    from botocore.exceptions import ClientError, EndpointConnectionError

    endpoint = args.endpoint_url.rstrip("/")
    group = args.function if args.function.startswith("/") else f"/aws/lambda/{args.function}"
    try:
        request = {"logGroupName": group, "startTime": since_ms(args.since), "interleaved": True}
    except ValueError as err:
        print(f"kinesim logs: {err}", file=sys.stderr)
        return 2
    if args.filter_pattern:
        request["filterPattern"] = args.filter_pattern
    logs, lam = _clients(endpoint, args.region)
    # As `aws logs tail --follow`: page through, then ask again from the newest timestamp printed,
    # skipping the events of that millisecond already printed (by eventId).
    newest, printed_at_newest = request["startTime"], set()
    try:
        while True:
            try:
                response = logs.filter_log_events(**request)
            except ClientError as err:
                if err.response["Error"]["Code"] != "ResourceNotFoundException":
                    print(f"kinesim logs: {err}", file=sys.stderr)
                    return 2
                problem = _missing(lam, args.function, endpoint)
                if problem:
                    print(f"kinesim logs: {problem}", file=sys.stderr)
                    return 2
                response = {"events": []}  # a function that has not logged yet
            for event in response["events"]:
                if event["timestamp"] == newest and event["eventId"] in printed_at_newest:
                    continue
                if event["timestamp"] > newest:
                    newest, printed_at_newest = event["timestamp"], set()
                printed_at_newest.add(event["eventId"])
                out.write(_format(event, args.timestamps))
            out.flush()
            if "nextToken" in response:
                request["nextToken"] = response["nextToken"]
                continue
            request.pop("nextToken", None)
            request["startTime"] = newest
            if not args.follow:
                return 0
            time.sleep(_POLL_S)
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:  # `kinesim logs F | head`
        return reader_gone()
    except EndpointConnectionError:
        print(f"kinesim logs: cannot reach kinesim at {endpoint}; is `kinesim serve` running?", file=sys.stderr)
        return 1


def _format(event: dict, timestamps: bool) -> str:
    message = event["message"] if event["message"].endswith("\n") else event["message"] + "\n"
    if not timestamps:
        return message
    when = datetime.fromtimestamp(event["timestamp"] / 1000, timezone.utc).isoformat(timespec="milliseconds")
    return f"{when} {event['logStreamName']} {message}"
