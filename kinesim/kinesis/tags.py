"""Tags on streams (AddTagsToStream, RemoveTagsFromStream, ListTagsForStream) and on any Kinesis
resource by ARN, stream or consumer (TagResource, UntagResource, ListTagsForResource).

The model checks lengths (keys 1–128, values 0–256, at most 200 per call, 50 keys to remove);
what only the service knows (the allowed characters and the limit of 50 tags on one resource,
counting the tags it already has) is checked by `tag_rules`, which every taggable resource uses.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from ..protocol.errors import in_use
from . import consumers
from .model import Consumer, Stream
from .tag_rules import MAX_TAGS, check_characters, check_new_tags

if TYPE_CHECKING:
    from .service import KinesisService


def _describe_target(svc: KinesisService, stream: Stream, consumer: Consumer | None) -> str:
    if consumer is not None:
        return f"consumer {consumer.name} of stream {stream.name} under account {svc.account}"
    return f"stream {stream.name} under account {svc.account}"


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


def add_tags_to_stream(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    _add(svc, _taggable(svc, svc.stream(p)), None, p["Tags"])
    return {}


def remove_tags_from_stream(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    _remove(svc, _taggable(svc, svc.stream(p)), None, p["TagKeys"])
    return {}


def list_tags_for_stream(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    stream = svc.stream(p)
    keys = sorted(stream.tags)
    start = p.get("ExclusiveStartTagKey")
    if start is not None:
        keys = [k for k in keys if k > start]
    limit = p.get("Limit", MAX_TAGS)
    return {"Tags": _tag_list(stream.tags, keys[:limit]), "HasMoreTags": len(keys) > limit}


def tag_resource(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    stream, consumer = consumers.resource(svc, p["ResourceARN"])
    _add(svc, stream if consumer else _taggable(svc, stream), consumer, p["Tags"])
    return {}


def untag_resource(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    stream, consumer = consumers.resource(svc, p["ResourceARN"])
    _remove(svc, stream if consumer else _taggable(svc, stream), consumer, p["TagKeys"])
    return {}


def list_tags_for_resource(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    stream, consumer = consumers.resource(svc, p["ResourceARN"])
    tags = consumer.tags if consumer is not None else stream.tags
    return {"Tags": _tag_list(tags, sorted(tags))}
