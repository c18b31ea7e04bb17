"""Read-only views of a scope's Kafka consumer groups, for the web console (plan §5, "Console").

The live state is the running coordinator's: groups change on the listener's loop only, so a
view is taken there (`call_soon_threadsafe`) rather than by reading its dicts from the console's
thread mid-change. Without a coordinator (no Kafka listener, or no group request since the
server started) the saved `kafka-group` documents say what a restart restores.

This module imports nothing of kio at load: the console imports it whatever the Kafka port, and
kio's schemas load only when Kafka is served (server.py). The assignment reader is loaded when a
group is described, i.e. when groups exist.
"""
from __future__ import annotations

import concurrent.futures
import struct
import sys
from typing import Any

# The document kinds of groups.GROUP_DOCUMENT and handlers/group_offsets.OFFSET_DOCUMENT, repeated
# here so reading them needs no kio (tests/test_web_console_kafka.py checks they agree).
GROUP_DOCUMENT = "kafka-group"
OFFSET_DOCUMENT = "kafka-offset"
LIVE_TIMEOUT_S = 2.0  # a loop busy this long (or stopped): fall back to the saved documents


def live_groups(kinesis: Any) -> dict[str, dict[str, Any]] | None:
    """{group id: view} of the coordinator serving `kinesis`'s scope; None without one."""
    module = sys.modules.get(__package__ + ".coordinator")
    if module is None:  # never imported: the listener has served no group request
        return None
    task = module._scopes.get(kinesis)
    if task is None or not task.done() or task.cancelled() or task.exception() is not None:
        return None
    coord = task.result()
    answer: concurrent.futures.Future = concurrent.futures.Future()

    def take() -> None:
        try:
            answer.set_result({gid: describe(g) for gid, g in list(coord.groups.items())})
        except BaseException as err:  # noqa: BLE001 - handed to the waiting thread
            answer.set_exception(err)
    try:
        coord.loop.call_soon_threadsafe(take)
        return answer.result(LIVE_TIMEOUT_S)
    except (RuntimeError, concurrent.futures.TimeoutError):  # the loop is closed, or stopped
        return None


def saved_groups(store: Any) -> dict[str, dict[str, Any]]:
    """{group id: view} of the saved group documents (state Stable or Empty as last saved)."""
    docs = store.documents(GROUP_DOCUMENT)
    if not docs:
        return {}
    from .groups import Group  # kio: only when there are groups to read
    return {gid: describe(Group.from_document(gid, doc, 0.0)) for gid, doc in docs.items()}


def describe(group: Any) -> dict[str, Any]:
    return {"state": group.state, "generation": group.generation, "protocol_type": group.protocol_type,
            "protocol": group.protocol, "leader": group.leader, "topics": sorted(group.topics()),
            "members": [{"id": m.id, "instance": m.instance, "client": m.client, "host": m.host,
                         "assignment": assignment_partitions(m.assignment) if group.protocol_type == "consumer" else {}}
                        for m in list(group.members.values())]}


def assignment_partitions(data: bytes) -> dict[str, list[int]]:
    """{topic: partitions} of a ConsumerProtocolAssignment (the "consumer" protocol's SyncGroup
    bytes); {} for bytes that are not one (a client's own protocol, or none yet)."""
    if len(data) < 2:
        return {}
    import importlib

    from kio.serial import entity_reader
    version = max(0, min(struct.unpack_from(">h", data)[0], 3))  # a newer one read as v3: Kafka only appends
    module = importlib.import_module(f"kio.schema.consumer_protocol_assignment.v{version}.data")
    try:
        value, _ = entity_reader(module.ConsumerProtocolAssignment)(data, 2)
    except Exception:  # noqa: BLE001 - not an assignment of the consumer protocol
        return {}
    out: dict[str, list[int]] = {}
    for tp in value.assigned_partitions:
        out.setdefault(str(tp.topic), []).extend(int(p) for p in tp.partitions)
    return out
