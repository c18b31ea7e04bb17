"""Where a TemplateURL points: the bucket and key of an S3 URL, in the forms `sam deploy`, `aws
cloudformation deploy` and the CDK write and in this server's own path style. The CloudFormation
API reads a stack's template there; the engine's nested stacks (stack_resources.py) watch that
object's version."""
from __future__ import annotations

import re
import urllib.parse

from .errors import TemplateError

# S3's virtual-host URL forms (global and regional, dash and dot, and localhost's); any other host
# is path-style: AWS's own S3 hosts, or this server by whatever name the client uses.
_VIRTUAL_HOST = re.compile(r"(?P<bucket>.+?)\.s3(?:[.-][a-z0-9-]+)?\.(?:amazonaws\.com(?:\.cn)?|localhost"
                           r"(?:\.localstack\.cloud)?)$")
UNSUPPORTED = "TemplateURL must be a supported URL."


def s3_location(url: str) -> tuple[str, str]:
    """The bucket and key of a TemplateURL; TemplateError (with AWS's message) when it names none."""
    try:
        parsed = urllib.parse.urlsplit(url)
        hostname = parsed.hostname  # parses the netloc: `http://[::1/b/k` is a ValueError here
    except ValueError:
        raise TemplateError(UNSUPPORTED) from None
    if parsed.scheme not in ("http", "https") or not hostname:
        raise TemplateError(UNSUPPORTED)
    host = hostname.lower()
    path = urllib.parse.unquote(parsed.path).lstrip("/")
    virtual = _VIRTUAL_HOST.match(host)
    if virtual:
        bucket, key = virtual.group("bucket"), path
    else:
        bucket, _, key = path.partition("/")
    if not bucket or not key:
        raise TemplateError(UNSUPPORTED)
    return bucket, key
