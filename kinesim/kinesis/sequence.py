"""Sequence numbers: AWS's 47-hex-digit layout, as decimal strings.

    '2' | shard created (9 hex, s) | shard index low nibble (1) | record index (16) | '00'
        | record arrival (9 hex, s) | shard index (8) | '2'

Strictly increasing within a shard (the record index grows) and comparable across a stream
(shard creation time leads). Record indexes start at 1: index 0 is the shard's
StartingSequenceNumber, so AFTER_SEQUENCE_NUMBER of it still yields the first record.

AWS's record index counts across the stream (kinesalite: per group of five shards); ours is the
shard's own record index, the key the store reads by. That keeps AT/AFTER_SEQUENCE_NUMBER a
parse rather than a lookup, and its durability is the records' own: a stream-wide counter would
have to be persisted or re-derived from the newest records, which retention can expire.
"""
from __future__ import annotations

from dataclasses import dataclass


# Index used for a closed shard's EndingSequenceNumber: above every record it holds.
END_INDEX = 0x7FFFFFFFFFFFFFFF


def make(shard_created: int, shard_index: int, record_index: int, arrival: int) -> str:
    text = "2%09x%x%016x00%09x%08x2" % (
        shard_created, shard_index & 0xF, record_index, arrival, shard_index)
    return str(int(text, 16))


@dataclass(frozen=True)
class Parsed:
    shard_created: int
    shard_index: int        # negative when the number's shard field has its high bit set
    record_index: int
    arrival: int            # seconds; 0 for version 0, which carries no time
    version: int = 2


_SMALL = 1 << 124           # numbers below this are read as "version 0" ones, offset by it
_V0_END = 1 << 129
_V12_LOW, _V12_HIGH = 1 << 185, 3 << 184
_MAX_CREATED = 16025175000  # seconds; AWS calls later shard creation times invalid


def parse(seq: str) -> Parsed | None:
    """The parts of a sequence number as AWS reads them, or None if AWS calls it invalid.

    Ported from kinesalite's parseSequence (db/index.js), written against production Kinesis:
    besides ours (version 2, the last hex digit), AWS reads version-1 numbers and small
    "version 0" ones, and refuses record indexes with the high bit set and far-future dates.
    It does not check the shard index's low nibble against the shard field."""
    if not seq.isascii() or not seq.isdigit() or len(seq) > 130:
        return None
    n = int(seq)
    if n < _SMALL:
        n += _SMALL
    text = "%x" % n
    if n < _V0_END:
        version = 0
    elif _V12_LOW < n < _V12_HIGH:
        version = int(text[-1], 16)
    else:
        return None
    created = int(text[1:10], 16)
    if version == 2:
        shard = int(text[38:46], 16)
        if text[11] > "7" or created >= _MAX_CREATED:
            return None
        return Parsed(created, shard if shard < 1 << 31 else -shard, int(text[11:27], 16), int(text[29:38], 16))
    if version == 1:
        return Parsed(created, int(text[38:46], 16), int(text[36:38], 16), int(text[13:22], 16), 1)
    if version == 0:
        # A last digit of 0 in the version-1/2 range also lands here, as in kinesalite.
        if created >= _MAX_CREATED:
            return None
        return Parsed(created, int(text[28:32], 16), 0, 0, 0)
    return None


def valid_ordering(seq: str, now: float) -> bool:
    """Whether PutRecord accepts `seq` as SequenceNumberForOrdering: AWS refuses what it cannot
    parse and numbers whose time is in the future (kinesalite's putRecord.js)."""
    parsed = parse(seq)
    return parsed is not None and parsed.arrival <= now


def shard_index(given: str) -> int | None:
    """The shard index a client's ShardId names, or None (AWS: "Could not find shard <given>").

    AWS's rule as kinesalite's resolveShardId records it: the text after the first '-' (or the
    whole id), decimal digits only, any number of them, at most 2^31-1. So '1', 'shardId-1',
    'a-00000000000001' and 'shardId-000000000001' all name shard 1; 'a-b-1' names none."""
    parts = given.split("-")
    digits = parts[1] if len(parts) > 1 and parts[1] else given
    if not digits.isascii() or not digits.isdigit():
        return None
    index = int(digits)
    return index if index <= 2147483647 else None


def shard_id(index: int) -> str:
    # A negative index (only ever decoded from a client's sequence number) keeps 11 digits after
    # its sign, as AWS writes it: "shardId--02147483648".
    return "shardId-%012d" % index if index >= 0 else "shardId--%011d" % -index

