"""Parameter names as Parameter Store reads them: plain names (`db-password`), paths
(`/app/prod/db-password`), ARNs (`arn:aws:ssm:REGION:ACCOUNT:parameter/app/prod/db-password`) and
selectors (`NAME:3` a version, `NAME:label` a label).

A first-level name is the same parameter with or without its leading slash (`/x` is `x`): it is
stored under the name without it, its ARN is `parameter/x` either way, and a path's ARN has no
doubled slash (`parameter/app/prod/x`) — LocalStack's recordings of AWS (test_parameters_with_path,
test_get_parameter_by_arn)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from kinesim.protocol.errors import AwsError

from .errors import validation

MAX_LEVELS = 15  # "A parameter name hierarchy can have a maximum of 15 levels" (the user guide)
_CHARS = re.compile(r"[a-zA-Z0-9_.\-/]+")

# AWS's answer to a malformed name (LocalStack's recording of AWS, test_hierarchical_parameter:
# "/x//b//c" and "x/b/c" are refused with "... sub-paths divided by slash symbol ...").
BAD_NAME = ('Parameter name: can\'t be prefixed with "ssm" (case-insensitive). If formed as a path, it can '
            "consist of sub-paths divided by slash symbol; each sub-path can be formed as a mix of letters, "
            "numbers and the following 3 symbols .-_")
RESERVED_PREFIX = 'Parameter name: can\'t be prefixed with "aws" or "ssm" (case-insensitive).'
BAD_PATH = ('The parameter doesn\'t meet the parameter name requirements. The parameter name must begin with a '
            'forward slash "/". It can\'t be prefixed with "aws" or "ssm" (case-insensitive). It must use only '
            "letters, numbers, or the following symbols: . (period), - (hyphen), _ (underscore). Special "
            'characters are not allowed. All sub-paths, if specified, must use the forward slash symbol "/". '
            "Valid example: /get/parameters2-/by1./path0_.")


def key(name: str) -> str:
    """The name a parameter is stored under: a first-level name without its leading slash."""
    return name[1:] if name.startswith("/") and "/" not in name[1:] else name


def full_path(name: str) -> str:
    """The name as a path from the root (`x` -> `/x`), for path matching."""
    return name if name.startswith("/") else "/" + name


def arn(region: str, account: str, name: str) -> str:
    return f"arn:aws:ssm:{region}:{account}:parameter{full_path(name)}"


def well_formed(name: str) -> bool:
    if not _CHARS.fullmatch(name) or "//" in name:
        return False
    if "/" in name and not name.startswith("/"):
        return False
    return not name.endswith("/") or name == "/"


def check_new_name(name: str) -> None:
    """A name PutParameter may create (moto's texts for the reserved prefixes, which AWS refuses as
    ValidationException; `/aws/...` paths are AWS's own public parameters)."""
    bare = name.lstrip("/").lower()
    if bare.startswith(("aws", "ssm")):
        if name.count("/") > 1 and name.lower().startswith("/aws"):
            raise _access_denied(f"No access to reserved parameter name: {name}.")
        raise validation(BAD_NAME if name.count("/") > 1 else RESERVED_PREFIX)
    if not well_formed(name) or name == "/":
        raise validation(BAD_NAME)
    if name.count("/") > MAX_LEVELS:
        # The API reference's description of the exception.
        raise _hierarchy_too_deep()


@dataclass(frozen=True)
class Reference:
    """What a Get* call names: the stored key, the name to answer with, and a selector."""
    key: str
    name: str  # as asked (a name's own spelling), or the stored name when asked by ARN
    by_arn: bool
    selector: str | None  # "3" or "label" (without the colon), None for the latest version


def parse_reference(text: str, region: str, account: str) -> Reference | None:
    """A Get* call's name (None: an ARN of another region or account, which names nothing here)."""
    by_arn = text.startswith("arn:")
    if by_arn:
        parts = text.split(":", 5)
        if len(parts) < 6 or parts[2] != "ssm" or not parts[5].startswith("parameter/"):
            raise validation(BAD_NAME)
        if parts[3] != region or parts[4] != account:
            return None
        rest = parts[5][len("parameter"):]
        name, _, selector = rest.partition(":")
        # `parameter/x` is the first-level `x`; `parameter/app/x` the path `/app/x`.
        name = key(name)
    else:
        name, sep, selector = text.partition(":")
        if sep and not selector:
            raise validation(BAD_NAME)
    if ":" in selector or not well_formed(name):
        raise validation(BAD_NAME)
    return Reference(key(name), name, by_arn, selector or None)


def parse_resource_id(text: str) -> str:
    """The parameter a tagging call names (its name, or its ARN's name part), as a stored key."""
    if text.startswith("arn:"):
        parts = text.split(":", 5)
        if len(parts) == 6 and parts[5].startswith("parameter/"):
            return key(parts[5][len("parameter"):])
    return key(text)


def check_path(path: str) -> str:
    """A GetParametersByPath or Path-filter path, without its trailing slash ("" for the root)."""
    if path != "/" and (not path.startswith("/") or not well_formed(path.rstrip("/"))):
        raise validation(BAD_PATH)
    return path.rstrip("/")


def under(name: str, path: str, recursive: bool) -> bool:
    """Whether the parameter `name` lies under `path` ("" the root): directly, or at any depth."""
    full = full_path(name)
    if not full.startswith(path + "/"):
        return False
    return recursive or "/" not in full[len(path) + 1:]


def _access_denied(message: str) -> AwsError:
    return AwsError("AccessDeniedException", message)


def _hierarchy_too_deep() -> AwsError:
    return AwsError("HierarchyLevelLimitExceededException",
                    "A hierarchy can have a maximum of 15 levels. For more information, see Requirements and "
                    "constraints for parameter names in the AWS Systems Manager User Guide.")
