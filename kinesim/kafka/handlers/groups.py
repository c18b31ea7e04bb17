"""FindCoordinator (10), JoinGroup (11), Heartbeat (12), LeaveGroup (13), SyncGroup (14),
DescribeGroups (15), ListGroups (16) and DeleteGroups (42): the classic group protocol over the
scope's coordinator (kafka/coordinator.py; docs/plans/issue-35-kafka.md §5).

All are coroutines run on the listener's loop, where the coordinator's state lives: JoinGroup
and SyncGroup wait there for the group to form without holding a thread, and the store is read
in the pool (`Context.blocking`).
"""
from __future__ import annotations

from typing import Any

from .. import coordinator, errors
from ..context import Context
from ..groups import EMPTY, GROUP_DOCUMENT
from .group_offsets import OFFSET_DOCUMENT, group_of

GROUP_KEY, TRANSACTION_KEY = 0, 1
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


async def find_coordinator(ctx: Context, body: Any) -> dict[str, Any]:
    """Node 0, at the address this connection reached, coordinates every group. Transactions are
    not served: their coordinator is not available (clients were told by ApiVersions already)."""
    key_type = getattr(body, "key_type", GROUP_KEY)
    keys = list(body.coordinator_keys) if hasattr(body, "coordinator_keys") else [body.key]
    answers = []
    for key in keys:
        found = key_type == GROUP_KEY
        answers.append({"key": key, "error_code": errors.NONE if found else errors.COORDINATOR_NOT_AVAILABLE,
                        "error_message": None if found else "kinesim has no transaction coordinator",
                        "node_id": ctx.node_id if found else -1, "host": ctx.host if found else "",
                        "port": ctx.port if found else -1})
    if hasattr(body, "coordinator_keys"):  # v4+: one answer per key
        return {"throttle_time": 0, "coordinators": answers}
    return {"throttle_time": 0, **{k: v for k, v in answers[0].items() if k != "key"}}


async def join_group(ctx: Context, body: Any) -> dict[str, Any]:
    coord = await coordinator.of(ctx)
    rebalance = body.rebalance_timeout if hasattr(body, "rebalance_timeout") else body.session_timeout  # v0
    answer = await coord.join(
        body.group_id, body.member_id, getattr(body, "group_instance_id", None), getattr(ctx, "client_id", "") or "",
        getattr(ctx, "peer", "") or "", _ms(body.session_timeout), _ms(rebalance), body.protocol_type,
        [(p.name, bytes(p.metadata)) for p in body.protocols], body.__version__)
    if body.__version__ < 7:  # the protocol name was not nullable then
        answer = {**answer, "protocol_name": answer["protocol_name"] or ""}
    return {"throttle_time": 0, **answer}


async def sync_group(ctx: Context, body: Any) -> dict[str, Any]:
    coord = await coordinator.of(ctx)
    assignments = {a.member_id: bytes(a.assignment) for a in body.assignments}
    code, assignment = await coord.sync(body.group_id, body.generation_id, body.member_id,
                                        getattr(body, "group_instance_id", None), assignments)
    group = coord.groups.get(body.group_id)
    ok = code == errors.NONE and group is not None
    return {"throttle_time": 0, "error_code": code, "protocol_type": group.protocol_type if ok else None,
            "protocol_name": group.protocol if ok else None, "assignment": assignment}


async def heartbeat(ctx: Context, body: Any) -> dict[str, Any]:
    coord = await coordinator.of(ctx)
    code = coord.heartbeat(body.group_id, body.generation_id, body.member_id, getattr(body, "group_instance_id", None))
    return {"throttle_time": 0, "error_code": code}


async def leave_group(ctx: Context, body: Any) -> dict[str, Any]:
    coord = await coordinator.of(ctx)
    if not hasattr(body, "members"):  # v0-2: one member, the top-level error is its own
        code = coord.leave(body.group_id, body.member_id, None)
        await coord.saved()  # the answer follows the group's save (kill -9 safe, as commits are)
        return {"throttle_time": 0, "error_code": code}
    if body.group_id not in coord.groups:
        return {"throttle_time": 0, "error_code": errors.UNKNOWN_MEMBER_ID, "members": []}
    members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                "error_code": coord.leave(body.group_id, m.member_id, m.group_instance_id)} for m in body.members]
    await coord.saved()  # the answer follows the group's save (kill -9 safe, as commits are)
    return {"throttle_time": 0, "error_code": errors.NONE, "members": members}


async def list_groups(ctx: Context, body: Any) -> dict[str, Any]:
    coord = await coordinator.of(ctx)
    offsets = await ctx.blocking(ctx.kinesis.store.documents, OFFSET_DOCUMENT)
    listed = {gid: (g.state, g.protocol_type or "") for gid, g in coord.groups.items()}
    for name in offsets:  # groups known only by their offsets (simple consumers, or a restart)
        listed.setdefault(group_of(name), (EMPTY, ""))
    wanted = {s.lower() for s in getattr(body, "states_filter", ()) or ()}
    types = {t.lower() for t in getattr(body, "types_filter", ()) or ()}
    groups = [{"group_id": gid, "protocol_type": ptype, "group_state": state, "group_type": "classic"}
              for gid, (state, ptype) in sorted(listed.items())
              if (not wanted or state.lower() in wanted) and (not types or "classic" in types)]
    return {"throttle_time": 0, "error_code": errors.NONE, "groups": groups}


async def describe_groups(ctx: Context, body: Any) -> dict[str, Any]:
    coord = await coordinator.of(ctx)
    out = []
    for gid in body.groups:
        group = coord.groups.get(gid)
        if group is None:
            # Kafka's answer for a group it does not have; one with offsets only is Empty.
            has_offsets = await ctx.blocking(_has_offsets, ctx.kinesis.store, gid)
            out.append({"error_code": errors.NONE, "group_id": gid, "group_state": EMPTY if has_offsets else "Dead",
                        "protocol_type": "", "protocol_data": "", "members": [],
                        "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
            continue
        members = [{"member_id": m.id, "group_instance_id": m.instance, "client_id": m.client, "client_host": m.host,
                    "member_metadata": m.metadata(group.protocol), "member_assignment": m.assignment}
                   for m in group.members.values()]
        out.append({"error_code": errors.NONE, "group_id": gid, "group_state": group.state,
                    "protocol_type": group.protocol_type or "", "protocol_data": group.protocol or "",
                    "members": members, "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
    return {"throttle_time": 0, "groups": out}


async def delete_groups(ctx: Context, body: Any) -> dict[str, Any]:
    coord = await coordinator.of(ctx)
    store = ctx.kinesis.store
    results = []
    for gid in body.groups_names:
        group = coord.groups.get(gid)
        if group is not None and (group.members or group.state != EMPTY):
            results.append({"group_id": gid, "error_code": errors.NON_EMPTY_GROUP})
            continue
        coord.drop(gid)  # before the store work: a join meanwhile makes a new group
        found = await ctx.blocking(_delete, store, gid)
        code = errors.NONE if found or group is not None else errors.GROUP_ID_NOT_FOUND
        results.append({"group_id": gid, "error_code": code})
    return {"throttle_time": 0, "results": results}


def _has_offsets(store: Any, gid: str) -> bool:
    return any(group_of(name) == gid for name in store.documents(OFFSET_DOCUMENT))


def _delete(store: Any, gid: str) -> bool:
    """Delete a group's offsets and document; whether it had any."""
    names = [name for name in store.documents(OFFSET_DOCUMENT) if group_of(name) == gid]
    store.delete_documents(OFFSET_DOCUMENT, names)
    had = store.document(GROUP_DOCUMENT, gid) is not None
    store.delete_document(GROUP_DOCUMENT, gid)
    return bool(names) or had


def _ms(value: Any) -> int:
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)
