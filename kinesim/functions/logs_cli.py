"""`kinesim logs FUNCTION`: print what a function logged (START / its output / END / REPORT), like
`aws logs tail /aws/lambda/FUNCTION` does against CloudWatch; `--follow` keeps printing."""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone

import boto3
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError

from ..console import reader_gone

DEFAULT_ENDPOINT = "http://localhost:4566"
_SINCE = re.compile(r"(\d+)([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("function", help="the function's name")
    parser.add_argument("-f", "--follow", action="store_true", help="keep printing new lines until Ctrl-C")
    parser.add_argument("--since", default="1h", help="how far back to start: 30s, 10m, 2h, 1d (default 1h); "
                                                      "'all' for everything kept")
    parser.add_argument("--timestamps", action="store_true", help="prefix each line with its UTC time and log stream")
    parser.add_argument("--endpoint-url", default=os.environ.get("AWS_ENDPOINT_URL") or DEFAULT_ENDPOINT,
                        help=f"the kinesim server (default: $AWS_ENDPOINT_URL, else {DEFAULT_ENDPOINT})")
    return parser


def since_ms(text: str, now: float | None = None) -> int:
    if text == "all":
        return 0
    match = _SINCE.fullmatch(text)
    if not match:
        raise ValueError(f"--since {text!r}: use a number and a unit, e.g. 30s, 10m, 2h, 1d, or 'all'")
    now = time.time() if now is None else now
    return int((now - int(match[1]) * _UNITS[match[2]]) * 1000)


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


def _check_function(endpoint: str, name: str) -> None:
    # Through the Lambda API, as a user would: kinesim checks the signature's shape, not its secret.
    lam = boto3.client("lambda", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="kinesim",
                       aws_secret_access_key="kinesim", config=Config(retries={"max_attempts": 1}))
    try:
        lam.get_function_configuration(FunctionName=name)
    except lam.exceptions.ResourceNotFoundException:
        raise LookupError(f"function {name!r} does not exist on {endpoint} "
                          f"(list them with: aws --endpoint-url {endpoint} lambda list-functions)") from None
    except EndpointConnectionError as err:
        raise urllib.error.URLError("connection refused") from err


def run(args: argparse.Namespace, out=sys.stdout) -> int:
    endpoint = args.endpoint_url.rstrip("/")
    try:
        start = since_ms(args.since)
        _check_function(endpoint, args.function)
    except (ValueError, LookupError) as err:
        print(f"kinesim logs: {err}", file=sys.stderr)
        return 2
    except urllib.error.URLError as err:
        print(f"kinesim logs: cannot reach kinesim at {endpoint} ({err.reason}); is `kinesim serve` running?",
              file=sys.stderr)
        return 1
    # Events sharing the newest timestamp already printed: the next poll asks from that millisecond
    # again (more may have arrived within it) and skips these.
    seen_at_last: set[tuple] = set()
    last = start
    try:
        while True:
            query = urllib.parse.urlencode({"since": last})
            events = _get(f"{endpoint}/_kinesim/logs/{urllib.parse.quote(args.function)}?{query}")["events"]
            for event in events:
                key = (event["timestamp"], event["logStreamName"], event["message"])
                if event["timestamp"] == last and key in seen_at_last:
                    continue
                if event["timestamp"] > last:
                    last, seen_at_last = event["timestamp"], set()
                seen_at_last.add(key)
                out.write(_format(event, args.timestamps))
            out.flush()
            if not args.follow:
                return 0
            time.sleep(0.5)
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:  # `kinesim logs F | head`
        return reader_gone()


def _format(event: dict, timestamps: bool) -> str:
    message = event["message"] if event["message"].endswith("\n") else event["message"] + "\n"
    if not timestamps:
        return message
    when = datetime.fromtimestamp(event["timestamp"] / 1000, timezone.utc).isoformat(timespec="milliseconds")
    return f"{when} {event['logStreamName']} {message}"
