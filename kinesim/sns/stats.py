"""What the web console shows of the SNS topics: a read-only snapshot of the topics and their
subscriptions (kinesim's endpoints are confirmed at once; PendingConfirmation says so)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .service import SnsService


def topic_stats(svc: "SnsService") -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(topics, subscriptions), by name and by topic then endpoint. A topic: name, arn, fifo,
    subscriptions (count), pending (unconfirmed count). A subscription: arn, topic (name),
    topic_arn, protocol, endpoint, confirmed, raw, filter_policy (the policy's text or None)."""
    with svc.lock:
        topics = sorted(svc.topics.values(), key=lambda t: t.name)
        subs = list(svc.subscriptions.values())
    names = {t.arn: t.name for t in topics}
    rows = [{"arn": s.arn, "topic": names.get(s.topic_arn, s.topic_arn.rsplit(":", 1)[-1]), "topic_arn": s.topic_arn,
             "protocol": s.protocol, "endpoint": s.endpoint,
             "confirmed": s.attributes.get("PendingConfirmation", "false") != "true", "raw": s.raw,
             "filter_policy": s.attributes.get("FilterPolicy") or None} for s in subs]
    rows.sort(key=lambda r: (r["topic"], r["endpoint"], r["arn"]))
    out = []
    for t in topics:
        mine = [r for r in rows if r["topic_arn"] == t.arn]
        out.append({"name": t.name, "arn": t.arn, "fifo": t.fifo, "subscriptions": len(mine),
                    "pending": sum(not r["confirmed"] for r in mine)})
    return out, rows
