// The overview: headline figures, the data directory's size, then every resource kind by kind
// (a compact table each: name linking to its page, state, one line of health).
"use strict";

(() => {
  const {el, replace, card, figures, table, poll, fmt, badge, notice, breakable} = KS;

  // The name (linked to its page), and under it the row's detail when it has one (a mapping's UUID).
  function nameCell(name, row) {
    const shown = breakable(name);
    return [row.href ? el("a", {href: row.href, title: name}, shown) : el("span", {title: name}, shown),
      row.detail ? el("span", {class: "detail mono"}, breakable(row.detail)) : null];
  }

  // Red when the state is a failure, or the line counts failures or errors ("0 failed" is not one).
  function healthCell(health, row) {
    const bad = /(FAIL|ERROR|failed|error)/i.test(row.state) ||
      /(missing|error:|\b[1-9][\d,]* (failed|errors?|dead letters?)\b)/.test(health || "");
    return el("span", {class: "health" + (bad ? " bad" : "")}, health || "");
  }

  function kindTable(kind) {
    return table([
      {key: "name", label: "Name", fmt: nameCell, cls: "wrap name"},
      {key: "state", label: "State", fmt: (s) => badge(s)},
      {key: "health", label: "Health", fmt: healthCell, cls: "wrap"},
    ], kind.rows, {id: "overview-" + kind.kind, rowId: (r) => r.id || r.name, empty: "No " + kind.title.toLowerCase()});
  }

  function dataDir(d) {
    const size = d.bytes === null ? "measuring…" : fmt.bytes(d.bytes);
    return el("span", {id: "data-dir-size", title: (d.in_memory ? "in memory (a temporary directory): " : "") + d.path +
      (d.measured ? "\nmeasured " + fmt.time(d.measured) : "")},
      size, d.files !== null ? el("span", {class: "muted"}, " · " + fmt.count(d.files, "file")) : null,
      d.in_memory ? el("span", {class: "muted"}, " · in memory") : null);
  }

  KS.route("/", (root) => {
    const head = el("div");
    const body = el("div", {class: "cards"});
    replace(root, el("h1", {}, "Overview"), head, body);
    let lastErrors = "";
    poll("overview", 2000, (doc) => {
      const h = doc.headline;
      replace(head, card("At a glance", figures([
        ["Records/s in", fmt.num(h.records_in_per_s)],
        ["Invocations/s", fmt.num(h.invocations_per_s)],
        ...doc.kinds.map((k) => [k.title, fmt.num(h.counts[k.kind])]),
        ["Data directory", dataDir(doc.data_dir)],
      ]), {cls: "wide"}));
      // Kinds with resources get a card each; the empty ones share one line at the end.
      const empty = doc.kinds.filter((k) => !k.rows.length);
      replace(body, doc.kinds.filter((k) => k.rows.length).map((k) => card(
        el("span", {}, k.title, el("span", {class: "muted"}, " " + k.rows.length)), kindTable(k))),
        empty.length ? card("Nothing yet", el("div", {style: {display: "flex", flexWrap: "wrap", gap: "2px 28px"}}, empty.map(kindTable)), {cls: "wide"}) : null);
      const errors = doc.errors.map((e) => e.area + ": " + e.message).join("; ");
      if (errors && errors !== lastErrors) notice("part of the overview failed: " + errors, "error");
      lastErrors = errors;
    });
  }, () => "Overview");
})();
