"""The group coordinator of one scope: Kafka's classic state machine (GroupCoordinator), run on
the listener's loop only (docs/plans/issue-35-kafka.md §5).

Empty -> PreparingRebalance (a join) -> CompletingRebalance (every member rejoined, or the
largest rebalance timeout passed: members that did not are dropped; JoinGroup answers go out,
the leader's with every member's metadata) -> Stable (the leader's SyncGroup: followers' waiting
SyncGroups are answered) -> PreparingRebalance again on a join, leave or session expiry. A new
group first waits the initial rebalance delay (group.initial.rebalance.delay.ms), so that
consumers started together form one generation instead of one per arrival.

Timers are the loop's (`call_at`): a member's session expiry, a rebalance's deadline, a member
id handed out by MEMBER_ID_REQUIRED that never joins. At Stable and at Empty the group's document
is saved (in the pool, in call order), so a restarted server has it Stable again and members'
heartbeats and commits carry on.

A generation remembers its topics' partition counts when it formed and how many of each its
leader assigned. A heartbeat that finds a topic grown since the generation formed (a reshard added
shards: plan §4 rule 4) moves the group to PreparingRebalance at once, so its members rejoin and
the leader assigns the new partitions within a heartbeat interval instead of at its next metadata
refresh (5 minutes). One that finds partitions the leader left out (it assigned from metadata older
than the topic: kafka-python can lose a refresh it asked for) does so only after LEADER_GRACE_S of
the generation: a leader that had no metadata yet rejoins by itself at once, and a rebalance forced
on top of its own cut its SyncGroup short (kafka-python 3.0.12 can go silent for good after that).
It is a dictionary lookup per subscribed topic, on the loop.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
import weakref
from typing import Any

from . import errors, resharding
from .groups import COMPLETING, DEAD, EMPTY, GROUP_DOCUMENT, PREPARING, STABLE, Group, Member

log = logging.getLogger("kinesim.kafka")

MIN_SESSION_MS, MAX_SESSION_MS = 6000, 1_800_000  # Kafka's group.min/max.session.timeout.ms
LEADER_GRACE_S = 3.0  # a stable generation's time to fix a short assignment by itself (the module's doc)


class Coordinator:
    def __init__(self, svc: Any, pool: Any, groups: dict[str, Group]):
        self.svc = svc
        self.store = svc.store
        self.initial_delay_s = getattr(svc.settings, "kafka_initial_rebalance_ms", 3000) / 1000
        self.pool = pool
        self.groups = groups
        self.loop = asyncio.get_running_loop()
        self._saving = asyncio.Lock()  # saves reach the store in the order the states were reached
        self._saves: set[asyncio.Task] = set()  # the loop keeps only weak references to tasks
        for group in groups.values():
            for member in group.members.values():
                self._expect_heartbeat(group, member)

    # JoinGroup

    async def join(self, group_id: str, member_id: str, instance: str | None, client: str, host: str,
                   session_ms: int, rebalance_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]],
                   version: int) -> dict[str, Any]:
        if not group_id:
            return _join_error(errors.INVALID_GROUP_ID, member_id)
        if not MIN_SESSION_MS <= session_ms <= MAX_SESSION_MS:
            return _join_error(errors.INVALID_SESSION_TIMEOUT, member_id)
        group = self.groups.setdefault(group_id, Group(group_id))
        if not group.supports(protocol_type, protocols):
            return _join_error(errors.INCONSISTENT_GROUP_PROTOCOL, member_id)
        static = group.static(instance)
        if not member_id and static is not None:
            member_id = static.id  # a static member keeps its id (and so its assignment) across restarts
        member = group.members.get(member_id) if member_id else None
        if member is None:
            if member_id and member_id not in group.pending:
                return _join_error(errors.UNKNOWN_MEMBER_ID, member_id)
            if not member_id and version >= 4 and instance is None:
                # KIP-394: a member gets its id first, so one whose join answer was lost is known.
                member_id = f"{client or 'member'}-{uuid.uuid4()}"
                group.pending[member_id] = self.loop.call_later(session_ms / 1000, self._forget_pending,
                                                                group, member_id)
                return _join_error(errors.MEMBER_ID_REQUIRED, member_id)
            if member_id in group.pending:
                group.pending.pop(member_id).cancel()
            member = Member(member_id or f"{instance or client or 'member'}-{uuid.uuid4()}", instance, client, host,
                            session_ms, rebalance_ms, protocol_type, protocols)
            group.members[member.id] = member
            if group.protocol_type is None or len(group.members) == 1:
                group.protocol_type = protocol_type
            return await self._await_join(group, member, rebalance=True)
        if instance is not None and member.instance not in (None, instance):
            return _join_error(errors.FENCED_INSTANCE_ID, member_id)
        changed = member.protocols != protocols
        member.session_ms, member.rebalance_ms, member.protocols = session_ms, rebalance_ms, protocols
        if group.state in (STABLE, COMPLETING) and not changed and member.id != group.leader:
            # A follower asking again with nothing new: the current generation's answer.
            member.last_heard = self.loop.time()
            return self._join_answer(group, member)
        return await self._await_join(group, member, rebalance=True)

    async def _await_join(self, group: Group, member: Member, rebalance: bool) -> dict[str, Any]:
        member.joining = self.loop.create_future()
        member.last_heard = self.loop.time()
        self._expect_heartbeat(group, member)
        if group.state != PREPARING:
            self._prepare(group)
        elif group.initial_until is not None:
            # Each arrival during the initial delay extends it, up to the rebalance timeout.
            until = min(self.loop.time() + self.initial_delay_s, group.rebalance_deadline)
            if until > group.initial_until:
                group.initial_until = until
                self._arm_join(group, until)
        self._maybe_complete(group)
        return await member.joining

    def _prepare(self, group: Group) -> None:
        """Into PreparingRebalance: waiting SyncGroups are told to rejoin."""
        # Also at Stable: a leader's SyncGroup may be saving the group while a member leaves.
        for m in group.members.values():
            _answer(m.syncing, (errors.REBALANCE_IN_PROGRESS, b""))
        was_empty = group.state == EMPTY
        group.state = PREPARING
        now = self.loop.time()
        longest = max((m.rebalance_ms for m in group.members.values()), default=0) / 1000
        group.rebalance_deadline = now + longest
        if was_empty and self.initial_delay_s > 0:
            group.initial_until = min(now + self.initial_delay_s, group.rebalance_deadline)
            self._arm_join(group, group.initial_until)
        else:
            group.initial_until = None
            self._arm_join(group, group.rebalance_deadline)

    def _arm_join(self, group: Group, when: float) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
        group.join_timer = self.loop.call_at(when, self._join_due, group)

    def _join_due(self, group: Group) -> None:
        group.join_timer = None
        if group.state != PREPARING:
            return
        if group.initial_until is not None:
            group.initial_until = None
            if not group.all_joined() and self.loop.time() < group.rebalance_deadline:
                self._arm_join(group, group.rebalance_deadline)  # the delay is over, the join wait goes on
                return
        self._complete_join(group)

    def _maybe_complete(self, group: Group) -> None:
        if group.state == PREPARING and group.initial_until is None and group.all_joined():
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        for m in [m for m in group.members.values() if not m.awaiting_join]:
            self._remove(group, m)  # did not rejoin in time
        group.generation += 1
        if not group.members:
            group.state, group.protocol, group.leader, group.protocol_type = EMPTY, None, None, None
            self._save(group)
            return
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        group.protocol = group.select_protocol()
        group.formed = resharding.layout(self.svc, group.topics())
        group.layout = None  # taken from the leader's assignments (SyncGroup)
        group.state = COMPLETING
        for m in group.members.values():
            m.assignment = b""
            _answer(m.joining, self._join_answer(group, m))

    def _join_answer(self, group: Group, member: Member) -> dict[str, Any]:
        leader = member.id == group.leader
        members = [{"member_id": m.id, "group_instance_id": m.instance, "metadata": m.metadata(group.protocol)}
                   for m in group.members.values()] if leader else []
        return {"error_code": errors.NONE, "generation_id": group.generation, "protocol_type": group.protocol_type,
                "protocol_name": group.protocol, "leader": group.leader, "member_id": member.id, "members": members}

    # SyncGroup, Heartbeat, LeaveGroup

    async def sync(self, group_id: str, generation: int, member_id: str, instance: str | None,
                   assignments: dict[str, bytes]) -> tuple[int, bytes]:
        group, member, code = self._known(group_id, member_id, instance)
        if code:
            return code, b""
        if generation != group.generation:
            return errors.ILLEGAL_GENERATION, b""
        member.last_heard = self.loop.time()
        if group.state == PREPARING:
            return errors.REBALANCE_IN_PROGRESS, b""
        if group.state == STABLE:
            return errors.NONE, member.assignment
        member.syncing = self.loop.create_future()
        if member.id == group.leader:
            for m in group.members.values():
                m.assignment = assignments.get(m.id, b"")
            group.layout, group.stable_since = group.assigned(), self.loop.time()
            group.state = STABLE
            await self._save(group)  # the answers follow the save: a restart finds the group Stable
            for m in group.members.values():
                if group.state == STABLE and group.generation == generation:
                    _answer(m.syncing, (errors.NONE, m.assignment))
        return await member.syncing

    def heartbeat(self, group_id: str, generation: int, member_id: str, instance: str | None) -> int:
        group, member, code = self._known(group_id, member_id, instance)
        if code:
            return code
        member.last_heard = self.loop.time()
        if group.state == PREPARING:
            return errors.REBALANCE_IN_PROGRESS
        if generation != group.generation:
            return errors.ILLEGAL_GENERATION
        if group.state == STABLE and self._resharded(group):
            self._prepare(group)
            return errors.REBALANCE_IN_PROGRESS
        return errors.NONE

    def _resharded(self, group: Group) -> bool:
        """Whether a subscribed topic has grown since the generation formed, or has partitions the
        leader left out for LEADER_GRACE_S (a group loaded after a restart takes the counts at
        its first heartbeat, and the assignments it saved)."""
        if group.formed is None:
            group.formed = resharding.layout(self.svc, group.topics())
        if group.layout is None:
            group.layout = group.assigned()
        now = resharding.layout(self.svc, group.formed)
        grown = sorted(t for t, n in group.formed.items() if now[t] > n)
        if not grown and group.layout is not None and self.loop.time() - group.stable_since >= LEADER_GRACE_S:
            assigned = resharding.layout(self.svc, group.layout)
            grown = sorted(t for t, n in group.layout.items() if assigned[t] > n)
        if grown:
            log.info("kafka: group %s: partitions of %s not assigned, rebalancing", group.id, grown)
        return bool(grown)

    def leave(self, group_id: str, member_id: str, instance: str | None) -> int:
        group = self.groups.get(group_id)
        if group is None or group.state == DEAD:
            return errors.UNKNOWN_MEMBER_ID
        member = group.static(instance) if instance is not None else group.members.get(member_id)
        if member is None:
            if member_id in group.pending:
                group.pending.pop(member_id).cancel()
                return errors.NONE
            return errors.UNKNOWN_MEMBER_ID
        if instance is not None and member_id and member.id != member_id:
            return errors.FENCED_INSTANCE_ID
        self._remove(group, member)
        self._rebalance_after_removal(group)
        return errors.NONE

    def commit_allowed(self, group_id: str, generation: int, member_id: str, instance: str | None) -> int:
        """Whether an OffsetCommit may write: generation -1 for a group without members (simple
        consumers, kcat without -G), else a member of the current generation outside
        CompletingRebalance (Kafka's rule: commits during PreparingRebalance are the revoking
        members' last ones)."""
        group = self.groups.get(group_id)
        if generation < 0 and (group is None or group.state in (EMPTY, DEAD)):
            return errors.NONE
        group, member, code = self._known(group_id, member_id, instance)
        if code:
            return code
        if generation != group.generation:
            return errors.ILLEGAL_GENERATION
        if group.state == COMPLETING:
            return errors.REBALANCE_IN_PROGRESS
        member.last_heard = self.loop.time()
        return errors.NONE

    def _known(self, group_id: str, member_id: str, instance: str | None):
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member is None:
            return group, None, errors.UNKNOWN_MEMBER_ID
        if instance is not None and member.instance not in (None, instance):
            return group, member, errors.FENCED_INSTANCE_ID
        return group, member, errors.NONE

    # Removal: leave, session expiry, deletion

    def _remove(self, group: Group, member: Member) -> None:
        group.members.pop(member.id, None)
        if member.expiry is not None:
            member.expiry.cancel()
        _answer(member.joining, _join_error(errors.UNKNOWN_MEMBER_ID, member.id))
        _answer(member.syncing, (errors.UNKNOWN_MEMBER_ID, b""))
        if group.leader == member.id:
            group.leader = next(iter(group.members), None)

    def _rebalance_after_removal(self, group: Group) -> None:
        if group.state in (STABLE, COMPLETING):
            if group.members:
                self._prepare(group)
            else:
                group.state, group.protocol, group.leader = EMPTY, None, None
                group.generation += 1
                self._save(group)
        elif group.state == PREPARING:
            if group.members or group.pending:
                self._maybe_complete(group)
            else:
                self._complete_join(group)

    def _expect_heartbeat(self, group: Group, member: Member) -> None:
        if member.expiry is not None:
            member.expiry.cancel()
        member.expiry = self.loop.call_at(member.last_heard + member.session_ms / 1000, self._check_session,
                                          group, member)

    def _check_session(self, group: Group, member: Member) -> None:
        member.expiry = None
        if group.members.get(member.id) is not member:
            return
        due = member.last_heard + member.session_ms / 1000
        # A member waiting for its JoinGroup or SyncGroup answer is not expected to heartbeat.
        if member.awaiting_join or member.awaiting_sync or self.loop.time() < due:
            self._expect_heartbeat(group, member)
            return
        log.info("kafka: group %s: member %s expired (no heartbeat for %d ms)", group.id, member.id, member.session_ms)
        self._remove(group, member)
        self._rebalance_after_removal(group)

    def _forget_pending(self, group: Group, member_id: str) -> None:
        group.pending.pop(member_id, None)
        self._maybe_complete(group)

    def drop(self, group_id: str) -> None:
        """The group was deleted (DeleteGroups, which checked that it was Empty)."""
        group = self.groups.pop(group_id, None)
        if group is not None:
            group.state = DEAD
            if group.join_timer is not None:
                group.join_timer.cancel()

    async def saved(self) -> None:
        """Wait for the group saves started so far (they reach the store in call order). LeaveGroup
        answers after them: a consumer's close() is followed at once by a kill -9 in the tests, and a
        restart that still found the leaver Stable in the group would hold the next member's JoinGroup
        until the leaver's session expired (kafka-python's default is 45 s)."""
        pending = list(self._saves)
        if pending:
            await asyncio.wait(pending)

    def _save(self, group: Group) -> asyncio.Task:
        doc = group.document()  # now: the state reached, whatever happens while the save waits

        async def save() -> None:
            async with self._saving:
                await self.loop.run_in_executor(self.pool, self.store.put_document, GROUP_DOCUMENT, group.id, doc)
        task = self.loop.create_task(save())
        self._saves.add(task)
        task.add_done_callback(self._saves.discard)
        return task


def _answer(future: asyncio.Future | None, value: Any) -> None:
    if future is not None and not future.done():
        future.set_result(value)


def _join_error(code: int, member_id: str) -> dict[str, Any]:
    return {"error_code": code, "generation_id": -1, "protocol_type": None, "protocol_name": None, "leader": "",
            "member_id": member_id, "members": []}


_scopes: "weakref.WeakKeyDictionary[Any, asyncio.Task]" = weakref.WeakKeyDictionary()


async def of(ctx: Any) -> Coordinator:
    """The coordinator of the connection's scope, made at first use with the groups saved before."""
    task = _scopes.get(ctx.kinesis)
    if task is None:
        svc = ctx.kinesis

        async def make() -> Coordinator:
            docs = await ctx.blocking(svc.store.documents, GROUP_DOCUMENT)
            now = asyncio.get_running_loop().time()
            return Coordinator(svc, ctx.pool, {gid: Group.from_document(gid, doc, now) for gid, doc in docs.items()})
        task = _scopes[svc] = asyncio.get_running_loop().create_task(make())
    return await task
