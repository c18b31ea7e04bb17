// Continuous queries: each named query's state, rows/s in, watermark, last batch, where its output
// goes and its error; Stop and Resume (they run `kinesim queries stop|resume` on the server, in the
// background: the row says "stopping"/"resuming" until they are done).
"use strict";

(() => {
  const {el, replace, card, table, poll, fmt, badge, link, act} = KS;

  function output(into, q) {
    if (!into) return el("span", {class: "muted"}, "–");
    const kind = q.into_kind === "deliveryStream" ? "delivery-streams" : "streams";
    return el("span", {}, q.into_kind === "deliveryStream" ? "delivery stream " : "stream ", link(kind, into));
  }

  function lastBatch(b) {
    if (!b) return el("span", {class: "muted"}, "none yet");
    const at = b.committed || b.started;
    return el("span", {title: "started " + fmt.time(b.started) + (b.committed ? ", committed " + fmt.time(b.committed) : ", not committed yet")},
      "#" + b.id, at ? el("span", {class: "muted"}, " · " + fmt.ago(at)) : null);
  }

  function watermark(w, q) {
    if (w) return w;
    const b = q.last_batch;
    return b && b.watermark ? fmt.time(b.watermark) : el("span", {class: "muted"}, q.event_time ? "–" : "no event time");
  }

  KS.route("/queries", (root) => {
    const status = el("p", {class: "subtitle"});
    const box = card("Continuous queries", el("p", {class: "empty"}, "Loading…"), {cls: "wide"});
    const detail = el("div");
    replace(root, el("h1", {}, "Continuous queries"), status, box, detail);
    let again;
    const run = (name, action) => act("queries/" + encodeURIComponent(name) + "/" + action, {},
      (r) => r.name + " is " + r.state + "…", () => again());
    again = poll("queries", 2000, (doc) => {
      replace(status, doc.note ? doc.note + "." : doc.spark.running ? "Spark runs (" + doc.spark.address + ")" : "Spark is not running: queries that should run resume when it starts (the next kinesim sql, a Resume, or kinesim serve --spark).",
        doc.live_at ? el("span", {class: "muted"}, " · live figures " + fmt.ago(doc.live_at)) : null,
        doc.live_error ? el("span", {class: "health bad"}, " · " + doc.live_error) : null);
      replace(box.body, table([
        {key: "name", label: "Name", fmt: (n, q) => el("span", {title: q.sql}, n)},
        {key: "state", label: "State", fmt: (s) => badge(s)},
        {key: "input_rows_per_s", label: "Rows/s in (30 s)", cls: "num", fmt: (n) => fmt.num(n)},
        {key: "processed_rows_per_s", label: "Rows/s processed", cls: "num", fmt: (n) => fmt.num(n)},
        {key: "watermark", label: "Watermark", fmt: watermark},
        {key: "last_batch", label: "Last batch", fmt: lastBatch},
        {key: "into", label: "Output", fmt: output},
        {key: "error", label: "Error", cls: "wrap", fmt: (e, q) => {
          const failed = q.action && q.action.done && q.action.error;
          return e || failed ? el("span", {class: "health bad"}, e || (q.action.action + " failed: " + q.action.error)) : "";
        }},
        {key: "name", label: "", fmt: (n, q) => {
          const busy = q.state === "stopping" || q.state === "resuming";
          return el("span", {},
            el("button", {class: "stop", disabled: busy || q.wanted === "stopped", onclick: () => run(n, "stop")}, "Stop"), " ",
            el("button", {class: "resume", disabled: busy || q.state === "running", onclick: () => run(n, "resume")}, "Resume"));
        }},
      ], doc.queries, {id: "queries", rowId: (q) => q.name,
        empty: "No continuous queries: start one with kinesim sql --continuous \"SELECT … FROM STREAM name …\" --into STREAM --name NAME"}));
      replace(detail, doc.queries.map((q) => card(el("span", {}, q.name, " ", el("span", {class: "muted"}, "reads " + q.streams.join(", "))),
        el("pre", {class: "data"}, q.sql), {})));
    });
  }, () => "Continuous queries");
})();
