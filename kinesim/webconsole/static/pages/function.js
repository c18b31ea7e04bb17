// A function's page: its figures and charts, warm workers, event source mappings and what became
// of their last batches, its live log, and an invoke form. API: kinesim/webconsole/functions.py.
"use strict";

(() => {
  const {el, replace, fmt} = KS;
  const MAX_LOG_LINES = 1000;

  // Batch outcomes (kinesim/functions/batch_timeline.py): colour and what they mean.
  const OUTCOMES = {
    "ok": ["good", "handled"],
    "partial": ["busy", "partial batch failure: the rest is retried"],
    "retried": ["busy", "function error: retried after a backoff"],
    "bisected": ["busy", "function error: split in halves (BisectBatchOnFunctionError)"],
    "on-failure": ["bad", "given up: sent to the on-failure destination"],
    "skipped": ["bad", "given up: records skipped (no on-failure destination)"],
    "failed": ["bad", "function error: the messages return to the queue"],
    "problem": ["bad", "the function could not be invoked"],
  };
  const outcomeBadge = (outcome) => el("span", {class: "badge " + (OUTCOMES[outcome] || ["busy"])[0],
    title: (OUTCOMES[outcome] || [, outcome])[1]}, outcome);

  const ms = (v) => fmt.ms(v);
  const shortSeq = (s) => s && s.length > 14 ? "…" + s.slice(-8) : s;
  const clock = (t) => { const d = new Date(t); return d.toTimeString().slice(0, 8) + "." + String(d.getMilliseconds()).padStart(3, "0"); };

  function draw(root, {name}) {
    const api = "functions/" + encodeURIComponent(name);
    const title = el("h1", {}, el("span", {class: "kind"}, "function"), name);
    const subtitle = el("p", {class: "subtitle"}, "…");
    const figures = el("div", {id: "function-figures"}, el("p", {class: "empty"}, "Loading…"));
    const invocations = KS.chart([
      {key: "invocations", label: "invocations/s", color: "#2f6fdf"},
      {key: "errors", label: "errors/s", color: "#d43c3c"},
      {key: "throttles", label: "throttled/s", color: "#c9a400"},
    ], {id: "chart-invocations"});
    const durations = KS.chart([
      {key: "p50", label: "p50", color: "#2a9d5c"},
      {key: "p90", label: "p90", color: "#e0692d"},
      {key: "p99", label: "p99", color: "#b33fb3"},
    ], {id: "chart-duration", format: ms});
    const mappings = el("div", {}, el("p", {class: "empty", id: "function-mappings"}, "Loading…"));
    const strip = el("div", {style: {display: "flex", gap: "2px", flexWrap: "wrap", margin: "0 0 10px"}});
    const timeline = el("div", {style: {maxHeight: "420px", overflow: "auto"}},
      el("p", {class: "empty", id: "mapping-timeline"}, "Loading…"));
    const logs = el("div", {id: "function-logs", class: "mono", style: {maxHeight: "360px", overflow: "auto",
      background: "#10151f", color: "#d7dde8", padding: "6px 10px", borderRadius: "4px", whiteSpace: "pre-wrap",
      wordBreak: "break-all", minHeight: "80px"}});
    const invoke = invokeForm(api);

    replace(root, title, subtitle,
      KS.card("Invocations and workers", figures, {cls: "wide"}),
      el("div", {class: "cards"},
        KS.card("Invocations per second (last 5 min)", invocations.node),
        KS.card("Duration percentiles", durations.node)),
      KS.card("Event source mappings", mappings, {cls: "wide"}),
      el("div", {class: "cards"},
        KS.card("Invoke", invoke),
        KS.card("Log (live)", logs, {tools: el("span", {class: "muted"}, "/aws/lambda/" + name)})),
      KS.card("Last batches of its mappings", [strip, timeline], {cls: "wide",
        tools: el("span", {class: "muted"}, "newest first · oldest → newest in the strip")}));

    KS.poll(api, 1500, (doc) => {
      replace(title, el("span", {class: "kind"}, "function"), el("span", {}, KS.breakable(doc.name)), KS.badge(doc.state));
      replace(subtitle, doc.arn, " · ", doc.runtime, " · handler ", el("code", {}, doc.handler), " · ",
        doc.memory_mb + " MB · timeout " + doc.timeout_s + " s");
      drawFigures(figures, doc);
      invocations.set(doc.points);
      durations.set(doc.points);
      replace(mappings, mappingTable(doc.mappings));
    });
    KS.poll(api + "/timeline", 1500, (doc) => {
      replace(strip, doc.entries.slice().reverse().map((e) => el("span", {title: clock(e.t) + " " + e.outcome + ", " + fmt.count(e.records, "record"),
        style: {width: "10px", height: "18px", borderRadius: "2px", background: "var(--" + (OUTCOMES[e.outcome] || ["busy"])[0] + ")"}})));
      replace(timeline, timelineTable(doc.entries));
    });
    followLogs(api, logs);
  }

  function drawFigures(node, doc) {
    const s = doc.summary, w = doc.workers;
    const errorRate = s.invocations ? (100 * s.errors / s.invocations).toFixed(1) + " %" : "–";
    replace(node, KS.figures([
      ["invocations (5 min)", fmt.num(s.invocations)],
      ["now", fmt.rate(s.per_s)],
      ["errors", el("span", {style: {color: s.errors ? "var(--bad)" : null}}, fmt.num(s.errors) + " (" + errorRate + ")")],
      ["throttled (waited for a worker)", fmt.num(s.throttles)],
      ["avg duration", ms(s.avg_ms)],
      ["p50", ms(s.p50_ms)], ["p90", ms(s.p90_ms)], ["p99", ms(s.p99_ms)],
      ["warm workers", w.idle + w.busy + " of " + w.max],
      ["busy / idle / starting", w.busy + " / " + w.idle + " / " + w.starting],
    ]));
  }

  function mappingTable(rows) {
    return KS.table([
      {label: "source", key: (r) => r, fmt: (r) => [r.source_href ? el("a", {href: r.source_href}, r.source) : r.source,
        el("div", {class: "muted"}, r.source_kind + " · " + r.uuid)]},
      {label: "state", key: "state", fmt: (v) => KS.badge(v)},
      {label: "last result", key: "last_result", cls: "wrap", fmt: (v) => el("span", {class: /PROBLEM/.test(v || "") ? "health bad" : ""}, v || "–")},
      {label: "last batch", key: "last_batch", fmt: (b) => b ? [outcomeBadge(b.outcome), " ", b.records + " rec · " + fmt.ago(b.t)] : "–"},
      {label: "behind", key: "lag_records", cls: "num", fmt: (v) => v === null ? "–" : fmt.num(v) + " rec"},
      {label: "iterator age", key: "iterator_age_ms", cls: "num", fmt: ms},
      {label: "settings", key: (r) => r, cls: "wrap", fmt: (r) => settings(r)},
      {label: "last batches", key: "outcomes", cls: "wrap", fmt: (o) => Object.keys(o).length
        ? Object.entries(o).map(([k, n]) => [outcomeBadge(k), " " + n + " "]) : "none yet"},
    ], rows, {id: "function-mappings", rowId: (r) => r.uuid, empty: "No event source mappings."});
  }

  function settings(r) {
    const parts = ["batch " + r.batch_size];
    if (r.starting_position) parts.push(r.starting_position);
    if (r.batching_window_s) parts.push("window " + r.batching_window_s + " s");
    if (r.parallelization > 1) parts.push("×" + r.parallelization + " per shard");
    if (r.bisect) parts.push("bisect");
    if (r.max_retries !== null && r.max_retries !== undefined) parts.push("retries " + (r.max_retries < 0 ? "∞" : r.max_retries));
    if (r.max_record_age_s !== null && r.max_record_age_s !== undefined && r.max_record_age_s >= 0) parts.push("max age " + r.max_record_age_s + " s");
    if (r.report_item_failures) parts.push("item failures");
    return [parts.join(" · "), r.on_failure ? el("div", {class: "muted"}, "on failure → " + r.on_failure) : null];
  }

  function timelineTable(entries) {
    return KS.table([
      {label: "time", key: "t", fmt: clock},
      {label: "source", key: "source"},
      {label: "outcome", key: "outcome", fmt: outcomeBadge},
      {label: "records", key: "records", cls: "num"},
      {label: "shard / records", key: (e) => e, fmt: (e) => [e.shard ? e.shard.replace("shardId-", "#") + " " : "",
        e.first ? el("span", {class: "mono", title: e.first + " … " + e.last}, shortSeq(e.first) + (e.last !== e.first ? " … " + shortSeq(e.last) : "")) : ""]},
      {label: "invokes", key: "invokes", cls: "num"},
      {label: "iterator age", key: "age_ms", cls: "num", fmt: ms},
      {label: "detail", key: (e) => e, cls: "wrap", fmt: detail},
    ], entries, {id: "mapping-timeline", rowId: (e) => e.mapping + ":" + e.id, empty: "No batches yet."});
  }

  function detail(e) {
    const bits = [];
    if (e.halves) bits.push("split into " + e.halves.join(" + "));
    if (e.outcome === "partial") bits.push(e.done + " done, the rest retried");
    if (e.outcome === "retried") bits.push("attempt " + e.retries + " failed");
    if (e.condition) bits.push(e.condition);
    if (e.destination) bits.push("→ " + e.destination);
    if (e.detail) bits.push(e.detail + (e.count > 1 ? " (×" + e.count + ")" : ""));
    if (e.error) bits.push("function error " + e.error);
    return [bits.join(" · "), e.request_id ? el("div", {class: "muted mono"}, e.request_id) : null];
  }

  // The log: the last lines, then every few hundred ms what was written after the cursor.
  function followLogs(api, node) {
    let cursor = null;
    KS.poll(() => api + "/logs" + (cursor ? "?cursor=" + encodeURIComponent(cursor) : ""), 1000, (doc) => {
      const atBottom = node.scrollTop + node.clientHeight >= node.scrollHeight - 4;
      if (cursor === null) replace(node);
      cursor = doc.cursor;
      for (const line of doc.lines) {
        node.append(el("div", {class: "logline", dataset: {id: line.id}, title: line.stream},
          el("span", {style: {color: "#7f8aa3"}}, clock(line.t) + "  "), line.message));
      }
      while (node.childElementCount > MAX_LOG_LINES) node.firstElementChild.remove();
      if (!node.childElementCount) replace(node, el("span", {class: "muted"}, "No log lines yet: invoke the function."));
      else if (node.firstElementChild.tagName === "SPAN") node.firstElementChild.remove();
      if (atBottom || doc.lines.length === node.childElementCount) node.scrollTop = node.scrollHeight;
    });
  }

  function invokeForm(api) {
    const payload = el("textarea", {id: "invoke-payload", rows: 6, spellcheck: "false"}, "{}");
    const result = el("div", {id: "invoke-result", style: {marginTop: "10px"}});
    const submit = el("button", {id: "invoke-submit", class: "primary", type: "submit"}, "Invoke");
    const form = el("form", {id: "invoke-form"}, el("label", {class: "muted", for: "invoke-payload"}, "Event (JSON)"), payload,
      el("div", {style: {marginTop: "8px", display: "flex", gap: "8px", alignItems: "center"}}, submit,
        el("span", {class: "muted"}, "RequestResponse, as Lambda's Invoke · Ctrl+Enter")));
    const run = async (event) => {
      event.preventDefault();
      submit.disabled = true;
      replace(result, el("span", {class: "muted"}, "invoking…"));
      try {
        const r = await KS.post(api + "/invoke", {payload: payload.value});
        replace(result,
          el("div", {}, r.function_error ? el("span", {class: "badge bad"}, "function error: " + r.function_error)
            : el("span", {class: "badge good"}, "OK " + r.status), " ", el("span", {class: "muted mono"}, r.request_id)),
          el("div", {class: "muted", style: {margin: "8px 0 2px"}}, "Result"), el("pre", {class: "data"}, pretty(r.payload)),
          el("div", {class: "muted", style: {margin: "8px 0 2px"}}, "Log tail"), el("pre", {class: "data"}, r.log));
      } catch (err) {
        replace(result, el("span", {class: "badge bad"}, err.code || ("HTTP " + err.status)), " ", err.message);
      } finally {
        submit.disabled = false;
      }
    };
    form.addEventListener("submit", run);
    payload.addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) run(e); });
    return [form, result];
  }

  function pretty(text) {
    try { return JSON.stringify(JSON.parse(text), null, 2); } catch (e) { return text; }
  }

  KS.route("/functions/:name", draw, (p) => p.name);
})();
