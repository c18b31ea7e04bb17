"""What AWS checks in the tags added to any Kinesis resource (stream, consumer, queue): the allowed
characters, the reserved `aws:` prefix and the limit of 50 tags on one resource, counting the tags it
already has. Kept apart from the tag operations so that each resource's module can check tags
without importing the others'."""
from __future__ import annotations

import re
from typing import Iterable

from ..protocol.errors import invalid_argument

MAX_TAGS = 50
# Unicode letters, digits, white space (the space character only), _ . / = + - % @ :
_ALLOWED = re.compile(r"[\u00C0-\u1FFF\u2C00-\uD7FFA-Za-z0-9 _./=+\-%@:]*")


def check_characters(strings: Iterable[str], action: str, target: str) -> None:
    strings = list(strings)
    if not all(_ALLOWED.fullmatch(s) for s in strings):
        raise invalid_argument("Some tags contain invalid characters. Valid characters: "
                               "Unicode letters, digits, white space, _ . / = + - % @ :.")
    if any("%" in s for s in strings):
        raise invalid_argument(f"Failed to {action} {target} because some tags contained illegal characters. "
                               "The allowed characters are Unicode letters, white-spaces, "
                               "'_',',','/','=','+','-','@',':'.")


def check_new_tags(current: dict[str, str], new: dict[str, str], target: str, kind: str = "stream") -> None:
    """Everything AWS checks before adding `new` to a resource that has `current`."""
    check_characters([*new, *new.values()], "add tags to", target)
    if any(key.lower().startswith("aws:") for key in new):
        raise invalid_argument(f"Failed to add tags to {target} because tag keys starting with 'aws:' are "
                               "reserved for system use.")
    if len(current.keys() | new.keys()) > MAX_TAGS:
        raise invalid_argument(f"Failed to add tags to {target} because a given {kind} cannot have more than "
                               f"{MAX_TAGS} tags associated with it.")
