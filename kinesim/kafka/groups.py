"""A consumer group's members and state as the classic protocol has them (Kafka's GroupMetadata
and MemberMetadata; docs/plans/issue-35-kafka.md §5), their documents, and the one thing the
coordinator reads of a member's opaque metadata: its subscription's topics.

Only the coordinator (kafka/coordinator.py) changes these, and only on the listener's loop, so
they hold no locks. Futures are the loop's: a JoinGroup or SyncGroup waiting for the group to
form awaits one, holding no thread.
"""
from __future__ import annotations

import asyncio
import base64
import struct
from dataclasses import dataclass, field
from typing import Any

from kio.schema.consumer_protocol_assignment.v0.data import ConsumerProtocolAssignment as _AssignmentV0
from kio.schema.consumer_protocol_assignment.v1.data import ConsumerProtocolAssignment as _AssignmentV1
from kio.schema.consumer_protocol_assignment.v2.data import ConsumerProtocolAssignment as _AssignmentV2
from kio.schema.consumer_protocol_assignment.v3.data import ConsumerProtocolAssignment as _AssignmentV3
from kio.schema.consumer_protocol_subscription.v0.data import ConsumerProtocolSubscription as _SubscriptionV0
from kio.schema.consumer_protocol_subscription.v1.data import ConsumerProtocolSubscription as _SubscriptionV1
from kio.schema.consumer_protocol_subscription.v2.data import ConsumerProtocolSubscription as _SubscriptionV2
from kio.schema.consumer_protocol_subscription.v3.data import ConsumerProtocolSubscription as _SubscriptionV3
from kio.serial import entity_reader

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"
GROUP_DOCUMENT = "kafka-group"

_SUBSCRIPTIONS = [entity_reader(cls) for cls in (_SubscriptionV0, _SubscriptionV1, _SubscriptionV2, _SubscriptionV3)]
_ASSIGNMENTS = [entity_reader(cls) for cls in (_AssignmentV0, _AssignmentV1, _AssignmentV2, _AssignmentV3)]


@dataclass(slots=True, eq=False)
class Member:
    id: str
    instance: str | None        # group.instance.id of a static member
    client: str
    host: str
    session_ms: int
    rebalance_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]   # (name, metadata) in the member's order of preference
    assignment: bytes = b""
    last_heard: float = 0.0     # loop time of its last join, sync or heartbeat
    joining: asyncio.Future | None = None   # a JoinGroup waiting for the rebalance to complete
    syncing: asyncio.Future | None = None   # a follower's SyncGroup waiting for the leader's
    expiry: asyncio.TimerHandle | None = None

    @property
    def awaiting_join(self) -> bool:
        return self.joining is not None and not self.joining.done()

    @property
    def awaiting_sync(self) -> bool:
        return self.syncing is not None and not self.syncing.done()

    def metadata(self, protocol: str | None) -> bytes:
        return next((meta for name, meta in self.protocols if name == protocol), b"")


@dataclass(slots=True, eq=False)
class Group:
    id: str
    state: str = EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending: dict[str, asyncio.TimerHandle] = field(default_factory=dict)  # ids handed out by MEMBER_ID_REQUIRED
    join_timer: asyncio.TimerHandle | None = None
    initial_until: float | None = None  # the initial rebalance delay's end, while it runs
    rebalance_deadline: float = 0.0
    # Resharding (plan §4 rule 4; kafka/coordinator.py's doc): each subscribed topic's partition
    # count when the generation formed, and how many of its partitions the leader assigned (a
    # leader may assign from metadata older than the topic). None: not taken yet.
    formed: dict[str, int] | None = None
    layout: dict[str, int] | None = None
    stable_since: float = 0.0  # loop time the generation became Stable

    def static(self, instance: str | None) -> Member | None:
        if instance is None:
            return None
        return next((m for m in self.members.values() if m.instance == instance), None)

    def all_joined(self) -> bool:
        return not self.pending and all(m.awaiting_join for m in self.members.values())

    def select_protocol(self) -> str | None:
        """Kafka's rule: among the protocols every member supports, the one most members list
        first (each votes for its most preferred candidate); ties go to the leader's order."""
        members = list(self.members.values())
        if not members:
            return None
        common = set(name for name, _ in members[0].protocols)
        for m in members[1:]:
            common &= {name for name, _ in m.protocols}
        votes: dict[str, int] = {}
        for m in members:
            choice = next((name for name, _ in m.protocols if name in common), None)
            if choice is not None:
                votes[choice] = votes.get(choice, 0) + 1
        if not votes:
            return None
        leader = self.members.get(self.leader or "", members[0])
        order = [name for name, _ in leader.protocols]
        return max(votes, key=lambda name: (votes[name], -order.index(name) if name in order else -len(order)))

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Whether a member with these protocols may join (INCONSISTENT_GROUP_PROTOCOL if not)."""
        if not self.members:
            return bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        names = {name for name, _ in protocols}
        return all(names & {name for name, _ in m.protocols} for m in self.members.values())

    def topics(self) -> set[str]:
        """The topics the members subscribe to (read for resharding's rebalance, plan §4)."""
        found: set[str] = set()
        if self.protocol_type == "consumer":
            for m in self.members.values():
                found.update(subscription_topics(m.metadata(self.protocol) or
                                                 (m.protocols[0][1] if m.protocols else b"")))
        return found

    def assigned(self) -> dict[str, int] | None:
        """Per subscribed topic, how many distinct partitions the members' assignments hold; None
        for a protocol type whose assignments are not the consumer protocol's."""
        if self.protocol_type != "consumer":
            return None
        held: dict[str, set[int]] = {topic: set() for topic in self.topics()}
        for m in self.members.values():
            for topic, partitions in assignment_partitions(m.assignment):
                held.setdefault(topic, set()).update(partitions)
        return {topic: len(partitions) for topic, partitions in held.items()}

    # The document saved at Stable and at Empty: after a restart the group is as it was then.

    def document(self) -> dict[str, Any]:
        return {"generation": self.generation, "state": self.state if self.state == EMPTY else STABLE,
                "protocol_type": self.protocol_type, "protocol": self.protocol, "leader": self.leader,
                "members": [{"id": m.id, "instance": m.instance, "client": m.client, "host": m.host,
                             "session_ms": m.session_ms, "rebalance_ms": m.rebalance_ms,
                             "protocol_type": m.protocol_type,
                             "protocols": [[name, _b64(meta)] for name, meta in m.protocols],
                             "assignment": _b64(m.assignment)} for m in self.members.values()]}

    @classmethod
    def from_document(cls, group_id: str, doc: dict[str, Any], now: float) -> "Group":
        group = cls(group_id, state=doc.get("state", EMPTY), generation=doc.get("generation", 0),
                    protocol_type=doc.get("protocol_type"), protocol=doc.get("protocol"), leader=doc.get("leader"))
        for m in doc.get("members", []):
            group.members[m["id"]] = Member(
                m["id"], m.get("instance"), m.get("client", ""), m.get("host", ""), m["session_ms"], m["rebalance_ms"],
                m.get("protocol_type", ""), [(name, _unb64(meta)) for name, meta in m["protocols"]],
                _unb64(m.get("assignment", "")), last_heard=now)
        if not group.members:
            group.state = EMPTY
        return group


def subscription_topics(metadata: bytes) -> list[str]:
    """The topics of a ConsumerProtocolSubscription (the "consumer" protocol type's member
    metadata); [] for bytes that are not one."""
    value = _versioned(_SUBSCRIPTIONS, metadata)
    return [] if value is None else [str(t) for t in value.topics]


def assignment_partitions(assignment: bytes) -> list[tuple[str, list[int]]]:
    """The (topic, partitions) of a ConsumerProtocolAssignment; [] for bytes that are not one."""
    value = _versioned(_ASSIGNMENTS, assignment)
    return [] if value is None else [(str(tp.topic), [int(p) for p in tp.partitions])
                                     for tp in value.assigned_partitions]


def _versioned(readers: list, data: bytes) -> Any:
    """A consumer protocol structure (int16 version, then the body), or None. A version newer
    than kio knows is read as its newest: Kafka only appends fields."""
    if len(data) < 2:
        return None
    version = struct.unpack_from(">h", data)[0]
    try:
        value, _ = readers[max(0, min(version, len(readers) - 1))](data, 2)
    except Exception:  # a client's own protocol type, or garbage: nothing to learn from it
        return None
    return value


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text)
