"""A stream's Kafka consumer groups as readers of the stream page (issue 35, plan §5 "Console").

A group reads this stream when it has committed an offset on one of its shards (`kafka-offset`
documents, `<group>/<shard uid>`: keyed by uid, so a namesake made since a deletion has none) or
when its members subscribe to the topic. Per partition: the committed offset (the next offset the
group will read, Kafka's meaning), the log end offset (LEO = the shard's last index, since
offset = index - 1) and the lag LEO - committed, which is what `kafka-consumer-groups
--describe` prints; like that tool, a partition without a committed offset shows no lag. The
`records` and `ms` every reader has come from `shard_lag` at the committed position, so records
expired by retention are not counted behind and the lag chart gets the oldest unread one's age.

State and members are the running coordinator's (kafka/group_view.py); without one, the state
saved at the last Stable or Empty, marked as such.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ..kafka import group_view
from ..kinesis.model import Shard, Stream

if TYPE_CHECKING:
    from ..scope_services import ScopeServices

SAVED_NOTE = "state as last saved: no Kafka client has asked about groups since the server started"


def kafka_readers(scope: "ScopeServices", stream: Stream, shards: list[Shard], shard_lag: Any) -> list[dict[str, Any]]:
    """`shard_lag`: stream_readers.shard_lag, passed in (that module lists this one's readers)."""
    kinesis = scope.kinesis
    by_uid = {s.uid: s for s in stream.shards}
    offsets: dict[str, dict[int, dict[str, Any]]] = {}
    for name, doc in kinesis.store.documents(group_view.OFFSET_DOCUMENT).items():
        group, _, uid = name.rpartition("/")  # a group id may itself contain '/'
        if uid.isdigit() and int(uid) in by_uid:
            offsets.setdefault(group, {})[int(uid)] = doc
    live = group_view.live_groups(kinesis)
    views = live if live is not None else group_view.saved_groups(kinesis.store)
    names = set(offsets) | {gid for gid, v in views.items() if stream.name in v["topics"]}
    now = time.time()
    out = []
    for gid in sorted(names):
        view = views.get(gid)
        committed = offsets.get(gid, {})
        # Partitions: those the console shows for the stream, and any other with an offset (a
        # closed shard expired from the shard list but still committed on).
        partitions = sorted(({s.uid: s for s in shards} | {uid: by_uid[uid] for uid in committed}).values(),
                            key=lambda s: s.index)
        rows = [_partition(scope, stream, shard, committed.get(shard.uid), view, now, shard_lag)
                for shard in partitions]
        members = view["members"] if view else []
        state = view["state"] if view else "Empty"
        detail = (f"Kafka consumer group, {len(members)} member{'' if len(members) == 1 else 's'}"
                  + (f" ({', '.join(_member_text(m, stream.name) for m in members)})" if members else "")
                  + (f", protocol {view['protocol']}" if view and view.get("protocol") else ""))
        note = SAVED_NOTE if view is not None and live is None else None
        known = [r for r in rows if r["lag"] is not None]
        out.append({"kind": "kafka", "name": gid, "href": None, "state": state, "detail": detail,
                    "positions": True, "note": note, "shards": rows,
                    "records": sum(r["records"] for r in rows), "max_ms": max((r["ms"] for r in rows), default=0),
                    "lag": sum(r["lag"] for r in known) if known else None,
                    "group": {"id": gid, "state": state, "generation": view["generation"] if view else None,
                              "protocol": view["protocol"] if view else None,
                              "source": "live" if live is not None else "saved" if view else "offsets",
                              "members": members}})
    return out


def _partition(scope: "ScopeServices", stream: Stream, shard: Shard, doc: dict[str, Any] | None,
               view: dict[str, Any] | None, now: float, shard_lag: Any) -> dict[str, Any]:
    log_end = shard.next_index - 1
    owner = next((m["id"] for m in (view["members"] if view else [])
                  if shard.index in m["assignment"].get(stream.name, [])), None)
    if doc is None:
        row = {"shard": shard.shard_id, "position": None, "ended": False, "records": 0, "ms": 0}
        committed = lag = None
    else:
        committed = int(doc["offset"])
        # The next record to read is offset `committed`, i.e. index committed + 1.
        row = shard_lag(scope, stream, shard, committed + 1, False, now)
        lag = max(0, log_end - committed)
    return {**row, "partition": shard.index, "committed": committed, "log_end": log_end, "lag": lag,
            "committed_ms": int(doc["at"] * 1000) if doc and doc.get("at") else None, "member": owner}


def _member_text(member: dict[str, Any], topic: str) -> str:
    parts = member["assignment"].get(topic)
    where = f" partitions {','.join(map(str, sorted(parts)))}" if parts else ""
    return f"{member['client'] or member['id']}@{member['host']}{where}"
