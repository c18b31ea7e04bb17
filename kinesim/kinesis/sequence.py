"""Sequence numbers: AWS's 47-hex-digit layout, as decimal strings.

    '2' | shard created (9 hex, s) | shard index low nibble (1) | record index (16) | '00'
        | record arrival (9 hex, s) | shard index (8) | '2'

Strictly increasing within a shard (the record index grows) and comparable across a stream
(shard creation time leads). Record indexes start at 1: index 0 is the shard's
StartingSequenceNumber, so AFTER_SEQUENCE_NUMBER of it still yields the first record.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..protocol.errors import invalid_argument

# Index used for a closed shard's EndingSequenceNumber: above every record it holds.
END_INDEX = 0x7FFFFFFFFFFFFFFF


def make(shard_created: int, shard_index: int, record_index: int, arrival: int) -> str:
    text = "2%09x%x%016x00%09x%08x2" % (
        shard_created, shard_index & 0xF, record_index, arrival, shard_index)
    return str(int(text, 16))


@dataclass(frozen=True)
class Parsed:
    shard_created: int
    shard_index: int
    record_index: int
    arrival: int


def parse(seq: str) -> Parsed | None:
    """The parts of a sequence number, or None if it is not one of ours."""
    if not seq.isdigit() or len(seq) > 60:
        return None
    text = "%x" % int(seq)
    if len(text) != 47 or text[0] != "2" or text[-1] != "2" or text[27:29] != "00":
        return None
    shard_index = int(text[38:46], 16)
    if int(text[10], 16) != shard_index & 0xF:
        return None
    return Parsed(int(text[1:10], 16), shard_index, int(text[11:27], 16), int(text[29:38], 16))


def shard_id(index: int) -> str:
    return "shardId-%012d" % index


def parse_or_invalid(seq: str, what: str) -> Parsed:
    parsed = parse(seq)
    if parsed is None:
        raise invalid_argument(what)
    return parsed
