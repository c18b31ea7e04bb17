"""Kafka frames <-> kio's request and response classes, and the versions kinesim advertises.

A frame is an int32 size, then a request header and body. The header's first eight bytes are
the same at every version (api key, api version, correlation id), so an unknown or unadvertised
API can still be answered (ApiVersions) or logged before anything else is parsed. The header's
own version follows from the body's flexibility, which kio's classes carry
(`__header_schema__`); ApiVersions' response header is v0 at every version (Kafka's rule, so that
a client that does not know the broker's flexible versions yet can read it), which kio's classes
also say.
"""
from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from . import nulls, shapes

API_VERSIONS = 18

# api key -> (lowest, highest) version served; see the plan's §2 for why each bound. Only what
# is implemented is advertised: clients pick the highest version both sides know.
VERSIONS: dict[int, tuple[int, int]] = {
    0: (3, 12),    # Produce; v13 names topics by id
    1: (4, 12),    # Fetch; v13+ name topics by id
    2: (1, 10),    # ListOffsets; v11 is for KIP-1005's last tiered offset
    API_VERSIONS: (0, 4),
    3: (0, 12),    # Metadata; v13 has no new field clients need
    60: (0, 1),    # DescribeCluster; v2 asks for controllers, which KRaft clients ask brokers not
    22: (0, 5),    # InitProducerId; v6 is KIP-939's two-phase commit (transactions)
    19: (2, 7),    # CreateTopics; every version kio has (Kafka 4's floor is 2)
    20: (1, 6),    # DeleteTopics
    37: (0, 3),    # CreatePartitions
    32: (1, 4),    # DescribeConfigs
    33: (0, 2),    # AlterConfigs
    44: (0, 1),    # IncrementalAlterConfigs
    10: (0, 4),    # FindCoordinator; v5+ are for KIP-848/transaction coordinators' new errors
    11: (0, 9),    # JoinGroup
    14: (0, 5),    # SyncGroup
    12: (0, 4),    # Heartbeat
    13: (0, 5),    # LeaveGroup
    8: (2, 9),     # OffsetCommit; v10 names topics by id
    9: (1, 9),     # OffsetFetch; v10 names topics by id
    16: (0, 5),    # ListGroups
    15: (0, 5),    # DescribeGroups; v6 answers unknown groups with an error instead of Dead
    42: (0, 2),    # DeleteGroups
    23: (2, 4),    # OffsetForLeaderEpoch
    17: (0, 1),    # SaslHandshake; v0 sends the token as a bare frame afterwards
    36: (0, 2),    # SaslAuthenticate
}

_FIXED_HEAD = struct.Struct(">hhi")


class Malformed(Exception):
    """A frame that cannot be served: its connection is closed (as a Kafka broker does)."""


@dataclass(frozen=True, slots=True)
class Request:
    api_key: int
    version: int
    correlation_id: int
    client_id: str | None
    body: Any  # kio's request class of that version


def head(frame: bytes) -> tuple[int, int, int]:
    """api key, api version, correlation id: the header fields every version starts with."""
    return _FIXED_HEAD.unpack_from(frame)


def advertised(api_key: int, version: int) -> bool:
    span = VERSIONS.get(api_key)
    return span is not None and span[0] <= version <= span[1]


@lru_cache(maxsize=None)
def _readers(api_key: int, version: int) -> tuple[Any, Any]:
    schema = load_request_schema(api_key, version)
    return entity_reader(schema.__header_schema__), entity_reader(schema)


@lru_cache(maxsize=None)
def response_class(api_key: int, version: int) -> type:
    return load_response_schema(api_key, version)


@lru_cache(maxsize=None)
def _writers(api_key: int, version: int) -> tuple[type, Any, Any]:
    schema = response_class(api_key, version)
    header = schema.__header_schema__
    return header, entity_writer(header), entity_writer(schema)


def decode(frame: bytes) -> Request:
    """The request in a frame (without its size), of an advertised API and version."""
    api_key, version, correlation_id = head(frame)
    if not advertised(api_key, version):
        raise Malformed(f"api key {api_key} version {version} is not served")
    header_reader, body_reader = _readers(api_key, version)
    try:
        header, used = header_reader(frame, 0)
        body, _ = body_reader(frame, used)
        nulls.check(body)  # a null where the version allows none: refused as Kafka's parser does
    except Exception as err:  # kio's native reader raises several kinds on truncated or bad input
        raise Malformed(f"api key {api_key} version {version}: unreadable request ({err})") from None
    # Bytes after the body are ignored, as Kafka's broker does: librdkafka 2.16's Metadata v12
    # ends with three of them.
    return Request(api_key, version, correlation_id, header.client_id, body)


def encode(api_key: int, version: int, correlation_id: int, tree: dict[str, Any]) -> bytes:
    """A response frame (size included) from a handler's plain tree."""
    header_cls, write_header, write_body = _writers(api_key, version)
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    write_header(out, shapes.build(header_cls, {"correlation_id": correlation_id}))
    write_body(out, shapes.build(response_class(api_key, version), tree))
    frame = out.getbuffer()
    struct.pack_into(">i", frame, 0, len(frame) - 4)
    del frame  # the view must go before the buffer's bytes are taken
    return out.getvalue()
