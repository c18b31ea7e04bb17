// Queues (SQS and Kinesis queues: depth, in flight, delayed, dead-letter queue), SNS topics with
// their subscriptions, and CloudWatch Logs log groups (bytes, streams, retention, last event).
"use strict";

(() => {
  const {el, replace, card, table, poll, fmt, badge, link} = KS;

  const num = (n) => el("span", {}, fmt.num(n));
  const dash = el.bind(null, "span", {class: "muted"}, "–");

  function deadLetter(d, row) {
    if (!d) return row.dead_letter_for && row.dead_letter_for.length
      ? el("span", {class: "muted"}, "DLQ of " + row.dead_letter_for.join(", ")) : dash();
    if (!d.exists) return el("span", {class: "health bad"}, d.name + " (missing)");
    return el("span", {}, row.type === "kinesis" ? "built-in" : d.name, ": ", el("b", {}, fmt.num(d.depth)),
      el("span", {class: "muted"}, " after " + d.max_receives + " receive" + (d.max_receives === 1 ? "" : "s")));
  }

  KS.route("/queues", (root) => {
    const box = card("Queues", el("p", {class: "empty"}, "Loading…"), {cls: "wide"});
    replace(root, el("h1", {}, "Queues"),
      el("p", {class: "subtitle"}, "SQS queues and Kinesis queues: depth is the messages (records) visible now; " +
        "a Kinesis queue's includes the stream's records it has not taken yet."), box);
    poll("queues", 2000, (doc) => replace(box.body, table([
      {key: "name", label: "Name", cls: "name", fmt: (n, r) => el("span", {title: r.arn}, KS.breakable(n))},
      {key: "type", label: "Type", fmt: (t, r) => t === "kinesis"
        ? el("span", {}, "Kinesis queue of ", link("streams", r.stream)) : (r.fifo ? "SQS FIFO" : "SQS")},
      {key: "state", label: "State", fmt: (s) => badge(s)},
      {key: "visible", label: "Depth", cls: "num", fmt: num},
      {key: "in_flight", label: "In flight", cls: "num", fmt: num},
      {key: "delayed", label: "Delayed", cls: "num", fmt: (n) => n === null ? dash() : num(n)},
      {key: "dead_letter", label: "Dead-letter queue", fmt: deadLetter},
      {key: "created", label: "Created", fmt: (t) => fmt.time(t)},
    ], doc.queues, {id: "queues", rowId: (r) => r.name, empty: "No queues"})));
  }, () => "Queues");

  function target(t, sub) {
    if (!t) return el("span", {}, sub.endpoint);
    const name = t.href && t.exists ? el("a", {href: t.href}, t.name) : t.name;
    return el("span", {title: sub.endpoint}, t.kind + " ", name,
      t.exists ? null : el("span", {class: "health bad"}, " (missing)"));
  }

  KS.route("/topics", (root) => {
    const topics = card("Topics", el("p", {class: "empty"}, "Loading…"));
    const subs = card("Subscriptions", el("p", {class: "empty"}, "Loading…"), {cls: "wide"});
    replace(root, el("h1", {}, "Topics"), el("div", {class: "cards"}, topics), subs);
    poll("topics", 2000, (doc) => {
      replace(topics.body, table([
        {key: "name", label: "Name", cls: "name", fmt: (n, r) => el("span", {title: r.arn}, KS.breakable(n))},
        {key: "fifo", label: "Type", fmt: (f) => f ? "FIFO" : "standard"},
        {key: "subscriptions", label: "Subscriptions", cls: "num", fmt: num},
        {key: "health", label: "Health", cls: "wrap", fmt: (h) => el("span", {class: /missing|pending/.test(h) ? "health bad" : "health"}, h)},
      ], doc.topics, {id: "topics", rowId: (r) => r.name, empty: "No topics"}));
      replace(subs.body, table([
        {key: "topic", label: "Topic"},
        {key: "protocol", label: "Protocol"},
        {key: "target", label: "Endpoint", fmt: target},
        {key: "confirmed", label: "Confirmed", fmt: (c) => el("span", {class: "badge " + (c ? "good" : "busy")}, c ? "yes" : "pending")},
        {key: "raw", label: "Raw delivery", fmt: (r) => r ? "yes" : "no"},
        {key: "filter_policy", label: "Filter policy", cls: "wrap",
         fmt: (p) => p ? el("code", {}, p) : el("span", {class: "muted"}, "none")},
      ], doc.subscriptions, {id: "subscriptions", rowId: (r) => r.arn, empty: "No subscriptions"}));
    });
  }, () => "Topics");

  KS.route("/log-groups", (root) => {
    const box = card("Log groups", el("p", {class: "empty"}, "Loading…"), {cls: "wide"});
    replace(root, el("h1", {}, "Log groups"), box);
    poll("log-groups", 2000, (doc) => replace(box.body, table([
      {key: "name", label: "Name", cls: "name", fmt: (n, r) => r.function
        ? el("span", {title: r.arn}, KS.breakable(n), el("span", {class: "muted"}, " · "), link("functions", r.function, "function"))
        : el("span", {title: r.arn}, KS.breakable(n))},
      {key: "stored_bytes", label: "Stored", cls: "num", fmt: (b) => fmt.bytes(b)},
      {key: "streams", label: "Streams", cls: "num", fmt: num},
      {key: "retention_days", label: "Retention", fmt: (d) => d ? fmt.count(d, "day") : "never expire"},
      {key: "last_event", label: "Last event", fmt: (t) => t ? el("span", {title: fmt.time(t)}, fmt.ago(t)) : dash()},
      {key: "created", label: "Created", fmt: (t) => fmt.time(t)},
    ], doc.log_groups, {id: "log-groups", rowId: (r) => r.name, empty: "No log groups"})));
  }, () => "Log groups");
})();
