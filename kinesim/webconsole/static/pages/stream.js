// A Kinesis stream's page: its figures, the shard map (lineage drawn: shards placed by hash-key
// range across and generation down, lines from parents to children), the shards, write rate and
// lag charts, enhanced fan-out consumers, every reader with its lag per shard, a record browser
// that consumes nothing, a live tail, and put / split / merge. API: kinesim/webconsole/streams.py.
"use strict";

(() => {
  const {el, replace, fmt} = KS;
  const SVG_NS = "http://www.w3.org/2000/svg";
  const MAX_HASH = 2n ** 128n - 1n;
  const TAIL_ROWS = 200;
  const PEEK_TYPES = ["TRIM_HORIZON", "LATEST", "AT_SEQUENCE_NUMBER", "AT_TIMESTAMP"];

  const shortId = (id) => id.replace(/^shardId-0*(?=\d)/, "#");
  const shortSeq = (s) => s ? "…" + s.slice(-10) : "–";
  const clock = (t) => { const d = new Date(t); return d.toTimeString().slice(0, 8) + "." + String(d.getMilliseconds()).padStart(3, "0"); };

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) node.setAttribute(k, v);
    for (const c of children.flat()) if (c !== undefined && c !== null) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return node;
  }

  function draw(root, {name}) {
    const api = "streams/" + encodeURIComponent(name);
    const state = {shards: [], shardKey: null, refresh: null};
    const title = el("h1", {}, el("span", {class: "kind"}, "stream"), name);
    const subtitle = el("p", {class: "subtitle"}, "…");
    const figures = el("div", {id: "stream-figures"}, el("p", {class: "empty"}, "Loading…"));
    const map = el("div", {}, el("p", {class: "empty"}, "Loading…"));
    const shards = el("div", {}, el("p", {class: "empty", id: "shards"}, "Loading…"));
    const writeBox = el("div", {});
    const lagBox = el("div", {});
    const readers = el("div", {}, el("p", {class: "empty", id: "readers"}, "Loading…"));
    const consumers = el("div", {}, el("p", {class: "empty", id: "consumers"}, "Loading…"));
    const actions = actionForms(api, () => state.refresh && state.refresh());
    const browser = recordBrowser(api);
    const tail = liveTail(api);
    let charts = null;

    replace(root, title, subtitle,
      KS.card("Stream", figures, {cls: "wide"}),
      KS.card("Shard map", [map, el("p", {class: "muted", style: {margin: "6px 0 0", fontSize: "12px"}},
        "Across: hash-key range (0 to 2¹²⁸−1). Down: generation (a split or merge makes children one row below their parents). ",
        "Blue: open; grey: closed (kept until retention has passed).")], {cls: "wide"}),
      KS.card("Shards", shards, {cls: "wide"}),
      el("div", {class: "cards"},
        KS.card("Write rate (records/s, last 5 min)", writeBox),
        KS.card("Lag per shard (oldest unread record of the slowest reader)", lagBox)),
      KS.card("Readers", readers, {cls: "wide", tools: el("span", {class: "muted"}, "how far behind each one is, per shard")}),
      KS.card("Enhanced fan-out consumers", consumers, {cls: "wide"}),
      el("div", {class: "cards"},
        KS.card("Record browser (peek: nothing is consumed)", browser.node),
        KS.card("Live tail (records put since this page opened, newest first)", tail)),
      KS.card("Actions", actions.node, {cls: "wide"}));

    state.refresh = KS.poll(api, 1500, (doc) => {
      replace(title, el("span", {class: "kind"}, "stream"), el("span", {}, KS.breakable(doc.name)), KS.badge(doc.status));
      replace(subtitle, doc.arn, " · ", doc.mode.toLowerCase().replace("_", "-"), " · retention ", doc.retention_hours, " h",
        " · encryption ", doc.encryption, doc.distribution === "AUTO" ? " · AUTO record distribution" : "");
      const f = doc.figures;
      replace(figures, KS.figures([
        ["open shards", fmt.num(f.open_shards)], ["shards listed", fmt.num(f.shards)],
        ["records in", fmt.rate(f.records_per_s, "rec")], ["bytes in", fmt.bytes(f.bytes_per_s) + "/s"],
        ["records kept", fmt.num(f.records_kept)], ["readers", fmt.num(f.readers)],
        ["EFO consumers", fmt.num(f.consumers)], ["max lag", fmt.ms(f.max_lag_ms)]]));
      replace(map, shardMap(doc.shards));
      replace(shards, shardTable(doc.shards));
      replace(readers, readerTable(doc.readers));
      replace(consumers, KS.table([
        {key: "name", label: "consumer"}, {key: "status", label: "status", fmt: (v) => KS.badge(v)},
        {key: "created_ms", label: "registered", fmt: fmt.time}, {key: "arn", label: "ARN", cls: "wrap"},
      ], doc.consumers, {id: "consumers", rowId: (c) => c.name,
        empty: "No consumer registered (RegisterStreamConsumer). Readers polling with GetRecords are not listed by Kinesis."}));
      const key = doc.shards.map((s) => s.id).join(",");
      if (key !== state.shardKey || !charts) {
        state.shardKey = key;
        charts = makeCharts(doc.shards, writeBox, lagBox);
      }
      charts.write.set(doc.points);
      charts.lag.set(doc.lag_points);
      state.shards = doc.shards;
      actions.update(doc.shards);
      browser.update(doc.shards);
    });
  }

  // ------------------------------------------------------------------ shard map
  function shardMap(shards) {
    const width = 1000, boxH = 46, gapY = 34, pad = 6;
    const generations = Math.max(0, ...shards.map((s) => s.generation)) + 1;
    const height = generations * (boxH + gapY) - gapY + 2 * pad;
    const x = (h) => pad + Number((BigInt(h) * 100000n) / MAX_HASH) / 100000 * (width - 2 * pad);
    const box = {};
    for (const s of shards) {
      const x0 = x(s.start_hash), x1 = Math.max(x0 + 3, x(s.end_hash));
      box[s.id] = {x0, x1, y: pad + s.generation * (boxH + gapY)};
    }
    const lines = [];
    for (const s of shards) {
      for (const p of [s.parent, s.adjacent_parent]) {
        if (!p || !box[p]) continue;
        const a = box[p], b = box[s.id];
        const ax = (Math.max(a.x0, b.x0) + Math.min(a.x1, b.x1)) / 2;  // over the hash keys they share
        lines.push(svg("path", {d: `M${ax},${a.y + boxH} C${ax},${a.y + boxH + gapY / 2} ${ax},${b.y - gapY / 2} ${ax},${b.y}`,
          fill: "none", stroke: "#8a94a6", "stroke-width": 1.5, "marker-end": "url(#arrow)",
          "data-parent": p, "data-child": s.id}));
      }
    }
    const boxes = shards.map((s) => {
      const b = box[s.id], w = b.x1 - b.x0;
      const label = w > 150 ? `${s.id}` : w > 60 ? shortId(s.id) : w > 22 ? shortId(s.id).slice(0, 4) : "";
      const second = w > 150 ? `${s.open ? "open" : "closed"} · ${fmt.num(s.records)} rec · ${fmt.num(s.write.records_per_s)}/s`
        : w > 70 ? `${fmt.num(s.records)} rec` : "";
      return svg("g", {"data-shard": s.id, class: "shard " + (s.open ? "open" : "closed")},
        svg("title", {}, `${s.id} (${s.open ? "open" : "closed"})\nhash keys ${s.start_hash} – ${s.end_hash}\n` +
          (s.parent ? `parent ${s.parent}` + (s.adjacent_parent ? `, adjacent parent ${s.adjacent_parent}` : "") + "\n" : "") +
          `${fmt.count(s.records, "record")} kept · ${fmt.num(s.write.records_per_s)} records/s in`),
        svg("rect", {x: b.x0, y: b.y, width: w, height: boxH, rx: 4,
          fill: s.open ? "#e3ecfb" : "#eef0f3", stroke: s.open ? "#2f6fdf" : "#a3abb8", "stroke-width": 1.2}),
        label ? svg("text", {x: b.x0 + w / 2, y: b.y + 19, "text-anchor": "middle", "font-size": 12, "font-weight": 600,
          fill: s.open ? "#1d2330" : "#667085"}, label) : null,
        second ? svg("text", {x: b.x0 + w / 2, y: b.y + 35, "text-anchor": "middle", "font-size": 11, fill: "#667085"}, second) : null);
    });
    return svg("svg", {id: "shard-map", viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img",
      "aria-label": "shard map", style: "display:block"},
      svg("defs", {}, svg("marker", {id: "arrow", viewBox: "0 0 8 8", refX: 7, refY: 4, markerWidth: 7, markerHeight: 7, orient: "auto"},
        svg("path", {d: "M0,0 L8,4 L0,8 z", fill: "#8a94a6"}))),
      lines, boxes);
  }

  function shardTable(shards) {
    const pct = (h) => (Number((BigInt(h) * 10000n) / MAX_HASH) / 100).toFixed(2) + " %";
    return KS.table([
      {key: "id", label: "shard", cls: "mono"},
      {key: "open", label: "state", fmt: (v, s) => KS.badge(v ? "open" : "closed")},
      {key: "start_hash", label: "hash-key range", fmt: (v, s) => el("span", {title: `${s.start_hash} – ${s.end_hash}`},
        `${pct(s.start_hash)} – ${pct(s.end_hash)}`)},
      {key: "parent", label: "parent", cls: "mono"},
      {key: "adjacent_parent", label: "adjacent parent", cls: "mono"},
      {key: "records", label: "records kept", cls: "num", fmt: fmt.num},
      {key: (s) => s.write.records_per_s, label: "records/s", cls: "num", fmt: fmt.num},
      {key: (s) => s.write.bytes_per_s, label: "bytes/s", cls: "num", fmt: fmt.bytes},
      {key: (s) => s.write.bytes_10min, label: "bytes in (10 min)", cls: "num", fmt: fmt.bytes},
      {key: "first_sequence", label: "first sequence number", cls: "mono", fmt: (v) => el("span", {title: v || ""}, shortSeq(v))},
      {key: "last_sequence", label: "last sequence number", cls: "mono", fmt: (v) => el("span", {title: v || ""}, shortSeq(v))},
    ], shards, {id: "shards", rowId: (s) => s.id, empty: "No shards listed yet."});
  }

  // ------------------------------------------------------------------ charts
  function makeCharts(shards, writeBox, lagBox) {
    const write = KS.chart([{key: "records", label: "all shards"}].concat(
      shards.filter((s) => s.open).map((s) => ({key: "records:" + s.id, label: shortId(s.id)}))), {id: "chart-write-rate"});
    const lag = KS.chart(shards.map((s) => ({key: s.id, label: shortId(s.id)})), {id: "chart-lag", format: (v) => fmt.ms(v)});
    replace(writeBox, write.node);
    replace(lagBox, lag.node, el("p", {class: "muted", style: {fontSize: "12px", margin: "4px 0 0"}},
      "Sampled while a page of this stream is open."));
    return {write, lag};
  }

  // ------------------------------------------------------------------ readers
  // A Kafka group's partition as kafka-consumer-groups prints it: committed / log end · lag
  // ("–" where the group has committed nothing on it).
  function kafkaPartition(s) {
    const dash = (v) => v === null || v === undefined ? "–" : fmt.num(v);
    return `p${s.partition}: ${dash(s.committed)} / ${fmt.num(s.log_end)} · lag ${dash(s.lag)}` +
      (s.member ? ` · ${s.member}` : "");
  }

  function readerTable(readers) {
    return KS.table([
      {key: "kind", label: "kind", fmt: (v) => el("span", {class: "badge busy"}, v)},
      {key: "name", label: "reader", cls: "name", fmt: (v, r) => r.href ? el("a", {href: r.href}, KS.breakable(v)) : KS.breakable(v)},
      {key: "state", label: "state", fmt: (v) => KS.badge(v)},
      {key: "records", label: "records behind", cls: "num", fmt: (v, r) => r.positions ? fmt.num(v) : "unknown"},
      {key: "max_ms", label: "oldest unread", cls: "num", fmt: (v, r) => r.positions ? fmt.ms(v) : "unknown"},
      {key: "shards", label: "per shard (records · ms)", fmt: (v, r) => r.positions
        ? el("div", {class: "mono"}, v.map((s) => el("div", {"data-lag-shard": s.shard},
          r.kind === "kafka" ? kafkaPartition(s) : `${shortId(s.shard)}: ${s.ended ? "done" : fmt.num(s.records) + " · " + fmt.ms(s.ms)}`)))
        : el("span", {class: "muted"}, "–")},
      {key: "detail", label: "what", cls: "wrap", fmt: (v, r) => el("span", {}, v, r.note ? el("div", {class: "muted"}, r.note) : null)},
    ], readers, {id: "readers", rowId: (r) => r.kind + ":" + r.name,
      empty: "No reader in kinesim: no event source mapping, delivery stream, channel, continuous query or Kafka consumer group reads this stream."});
  }

  // ------------------------------------------------------------------ record browser
  function dataCell(r) {
    if (r.format === "kpl") {
      return el("div", {}, el("span", {class: "badge busy"}, r.text), r.user_records.map((u) => el("div", {style: {marginTop: "4px"}},
        el("span", {class: "muted"}, `#${u.subsequence} key ${u.partition_key} · ${u.format} · ${fmt.bytes(u.size)}`),
        el("pre", {class: "data"}, u.text + (u.truncated ? "\n…" : "")))),
        r.user_records_hidden ? el("div", {class: "muted"}, `… and ${fmt.count(r.user_records_hidden, "more user record")}`) : null);
    }
    return el("div", {}, el("span", {class: "muted", style: {fontSize: "11.5px"}}, `${r.format} · ${fmt.bytes(r.size)}`),
      el("pre", {class: "data"}, r.text + (r.truncated ? "\n…" : "")));
  }

  function recordTable(records, id, empty) {
    return KS.table([
      {key: "arrival_ms", label: "arrival", fmt: (v) => el("span", {title: fmt.time(v)}, clock(v))},
      {key: "shard", label: "shard", fmt: shortId},
      {key: "partition_key", label: "partition key", cls: "wrap"},
      {key: "sequence_number", label: "sequence number", cls: "mono", fmt: (v) => el("span", {title: v}, shortSeq(v))},
      {key: "text", label: "data", cls: "wrap", fmt: (v, r) => dataCell(r)},
    ], records, {id, rowId: (r) => r.sequence_number, empty});
  }

  function recordBrowser(api) {
    const shard = el("select", {id: "peek-shard"});
    const type = el("select", {id: "peek-type"}, PEEK_TYPES.map((t) => el("option", {value: t}, t)));
    const value = el("input", {id: "peek-value", placeholder: "sequence number, or time (ISO 8601 / epoch ms)", size: 30});
    const submit = el("button", {id: "peek-submit", class: "primary", type: "submit"}, "Peek");
    const results = el("div", {}, el("p", {class: "empty", id: "peek-results"}, "Choose a shard and a position."));
    const hint = () => { value.disabled = type.value === "TRIM_HORIZON" || type.value === "LATEST"; };
    type.addEventListener("change", hint);
    hint();
    const form = el("form", {id: "peek-form", class: "inline", onsubmit: async (e) => {
      e.preventDefault();
      submit.disabled = true;
      try {
        const q = new URLSearchParams({shard: shard.value, type: type.value, limit: "25"});
        if (!value.disabled && value.value) q.set("value", value.value);
        const doc = await KS.get(api + "/records?" + q);
        replace(results, el("p", {class: "muted"}, `${fmt.count(doc.records.length, "record")} of ${doc.shard} from ${doc.type}`,
          doc.at_tip ? " (up to the newest)" : " (more follow)"),
          recordTable(doc.records, "peek-results", "No record at that position."));
      } catch (err) {
        KS.notice(err.message, "error");
      } finally {
        submit.disabled = false;
      }
    }},
      el("label", {}, "shard", shard), el("label", {}, "from", type), el("label", {}, "value", value), submit);
    return {node: el("div", {}, form, el("div", {style: {marginTop: "10px", maxHeight: "520px", overflow: "auto"}}, results)),
      update(shards) { fillSelect(shard, shards.map((s) => s.id)); }};
  }

  // ------------------------------------------------------------------ live tail
  function liveTail(api) {
    let cursor = null;
    const body = el("tbody", {});
    const table = el("table", {class: "grid", id: "live-tail"},
      el("thead", {}, el("tr", {}, ["arrival", "shard", "partition key", "sequence number", "data"].map((h) => el("th", {}, h)))), body);
    const status = el("p", {class: "muted", style: {fontSize: "12px", margin: "0 0 6px"}}, "Waiting for records…");
    KS.poll(() => api + "/tail" + (cursor ? "?cursor=" + encodeURIComponent(cursor) : ""), 1000, (doc) => {
      cursor = doc.cursor;
      if (!doc.records.length) return;
      const rows = recordTable(doc.records, null).querySelectorAll("tbody tr");
      body.prepend(...rows);
      while (body.children.length > TAIL_ROWS) body.lastElementChild.remove();
      replace(status, `${fmt.count(body.children.length, "record")} shown (at most ${TAIL_ROWS})`,
        doc.skipped ? ` · ${fmt.count(doc.skipped, "older one")} skipped` : "", " · last at ", clock(doc.records[0].arrival_ms));
    });
    return el("div", {style: {maxHeight: "520px", overflow: "auto"}}, status, table);
  }

  // ------------------------------------------------------------------ actions
  function fillSelect(select, values, labels) {
    const current = select.value;
    const same = select.options.length === values.length && values.every((v, i) => select.options[i].value === v);
    if (!same) replace(select, values.map((v, i) => el("option", {value: v}, labels ? labels[i] : v)));
    if (values.includes(current)) select.value = current;
  }

  function actionForms(api, refresh) {
    let shards = [];
    const key = el("input", {id: "put-key", placeholder: "partition key", required: true, value: "console"});
    const data = el("textarea", {id: "put-data", placeholder: "data (text; JSON shows pretty)", rows: 3}, '{"hello": "world"}');
    const putSubmit = el("button", {id: "put-submit", class: "primary", type: "submit"}, "Put record");
    const put = el("form", {id: "put-form", onsubmit: async (e) => {
      e.preventDefault();
      await guarded(putSubmit, () => KS.act(api + "/put", {partition_key: key.value, data: data.value},
        (r) => `Put to ${r.shard} as ${r.sequence_number}`, refresh));
    }}, el("label", {class: "muted"}, "partition key"), el("div", {}, key), el("label", {class: "muted"}, "data"), data,
      el("div", {style: {marginTop: "6px"}}, putSubmit));

    const splitShard = el("select", {id: "split-shard"});
    const splitHash = el("input", {id: "split-hash", size: 42, class: "mono"});
    const splitSubmit = el("button", {id: "split-submit", class: "primary", type: "submit"}, "Split");
    let hashEdited = false;
    splitHash.addEventListener("input", () => { hashEdited = true; });
    const midpoint = () => {
      const s = shards.find((x) => x.id === splitShard.value);
      if (s && !hashEdited) splitHash.value = s.midpoint;
    };
    splitShard.addEventListener("change", () => { hashEdited = false; midpoint(); });
    const split = el("form", {id: "split-form", class: "inline", onsubmit: async (e) => {
      e.preventDefault();
      await guarded(splitSubmit, () => KS.act(api + "/split", {shard: splitShard.value, new_starting_hash_key: splitHash.value},
        `Split of ${splitShard.value} accepted`, () => { hashEdited = false; refresh(); }));
    }}, el("label", {}, "shard", splitShard), el("label", {}, "new starting hash key (midpoint prefilled)", splitHash), splitSubmit);

    const mergeShard = el("select", {id: "merge-shard"});
    const mergeAdjacent = el("select", {id: "merge-adjacent"});
    const mergeSubmit = el("button", {id: "merge-submit", class: "primary", type: "submit"}, "Merge");
    const neighbours = () => {
      const s = shards.find((x) => x.id === mergeShard.value);
      const next = s ? shards.filter((o) => o.open && o.id !== s.id &&
        (BigInt(o.start_hash) === BigInt(s.end_hash) + 1n || BigInt(o.end_hash) + 1n === BigInt(s.start_hash))) : [];
      fillSelect(mergeAdjacent, next.map((o) => o.id));
    };
    mergeShard.addEventListener("change", neighbours);
    const merge = el("form", {id: "merge-form", class: "inline", onsubmit: async (e) => {
      e.preventDefault();
      await guarded(mergeSubmit, () => KS.act(api + "/merge", {shard: mergeShard.value, adjacent: mergeAdjacent.value},
        `Merge of ${mergeShard.value} and ${mergeAdjacent.value} accepted`, refresh));
    }}, el("label", {}, "shard", mergeShard), el("label", {}, "adjacent shard", mergeAdjacent), mergeSubmit);

    const node = el("div", {class: "cards"},
      el("div", {}, el("h3", {style: {margin: "0 0 6px", fontSize: "13px"}}, "Put a record"), put),
      el("div", {},
        el("h3", {style: {margin: "0 0 6px", fontSize: "13px"}}, "Split a shard"), split,
        el("h3", {style: {margin: "16px 0 6px", fontSize: "13px"}}, "Merge two adjacent shards"), merge,
        el("p", {class: "muted", style: {fontSize: "12px"}}, "Both go through SplitShard / MergeShards: AWS's checks and errors apply.")));
    return {node, update(list) {
      shards = list;
      const open = list.filter((s) => s.open).map((s) => s.id);
      fillSelect(splitShard, open);
      fillSelect(mergeShard, open);
      midpoint();
      neighbours();
    }};
  }

  async function guarded(button, run) {
    button.disabled = true;
    try { await run(); } catch (err) { /* told by KS.act */ } finally { button.disabled = false; }
  }

  KS.route("/streams/:name", draw, (p) => p.name);
})();
