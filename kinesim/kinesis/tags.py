"""Tags on streams (AddTagsToStream, RemoveTagsFromStream, ListTagsForStream) and on any Kinesis
resource by ARN, stream or consumer (TagResource, UntagResource, ListTagsForResource).

The model checks lengths (keys 1–128, values 0–256, at most 200 per call, 50 keys to remove);
what is checked here is what only the service knows: the allowed characters and the limit of 50
tags on one resource, counting the tags it already has.
"""
from __future__ import annotations

import re
from typing import Any, Iterable

from ..protocol.errors import in_use, invalid_argument
from . import consumers
from .model import Consumer, Stream
from .service import KinesisService, operation

MAX_TAGS = 50
# Unicode letters, digits, white space (the space character only), _ . / = + - % @ :
_ALLOWED = re.compile(r"[\u00C0-\u1FFF\u2C00-\uD7FFA-Za-z0-9 _./=+\-%@:]*")


def _describe_target(svc: KinesisService, stream: Stream, consumer: Consumer | None) -> str:
    if consumer is not None:
        return f"consumer {consumer.name} of stream {stream.name} under account {svc.account}"
    return f"stream {stream.name} under account {svc.account}"


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


def _taggable(svc: KinesisService, stream: Stream) -> Stream:
    if stream.status not in ("ACTIVE", "UPDATING"):
        raise in_use(f"Stream {stream.name} under account {svc.account} not ACTIVE, instead in state {stream.status}")
    return stream


def _tag_list(tags: dict[str, str], keys: Iterable[str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": tags[k]} for k in keys]


def _add(svc: KinesisService, stream: Stream, consumer: Consumer | None, new: dict[str, str]) -> None:
    with stream.lock:
        tags = consumer.tags if consumer is not None else stream.tags
        check_new_tags(tags, new, _describe_target(svc, stream, consumer), "consumer" if consumer else "stream")
        tags.update(new)
        svc.save(stream)


def _remove(svc: KinesisService, stream: Stream, consumer: Consumer | None, keys: list[str]) -> None:
    check_characters(keys, "remove tags from", _describe_target(svc, stream, consumer))
    with stream.lock:
        tags = consumer.tags if consumer is not None else stream.tags
        for key in keys:
            tags.pop(key, None)
        svc.save(stream)


@operation("AddTagsToStream")
def add_tags_to_stream(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    _add(svc, _taggable(svc, svc.stream(p)), None, p["Tags"])
    return {}


@operation("RemoveTagsFromStream")
def remove_tags_from_stream(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    _remove(svc, _taggable(svc, svc.stream(p)), None, p["TagKeys"])
    return {}


@operation("ListTagsForStream")
def list_tags_for_stream(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    stream = svc.stream(p)
    keys = sorted(stream.tags)
    start = p.get("ExclusiveStartTagKey")
    if start is not None:
        keys = [k for k in keys if k > start]
    limit = p.get("Limit", MAX_TAGS)
    return {"Tags": _tag_list(stream.tags, keys[:limit]), "HasMoreTags": len(keys) > limit}


@operation("TagResource")
def tag_resource(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    stream, consumer = consumers.resource(svc, p["ResourceARN"])
    _add(svc, stream if consumer else _taggable(svc, stream), consumer, p["Tags"])
    return {}


@operation("UntagResource")
def untag_resource(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    stream, consumer = consumers.resource(svc, p["ResourceARN"])
    _remove(svc, stream if consumer else _taggable(svc, stream), consumer, p["TagKeys"])
    return {}


@operation("ListTagsForResource")
def list_tags_for_resource(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    stream, consumer = consumers.resource(svc, p["ResourceARN"])
    tags = consumer.tags if consumer is not None else stream.tags
    return {"Tags": _tag_list(tags, sorted(tags))}
