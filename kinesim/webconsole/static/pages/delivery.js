// The delivery stream page: where records come from and where they go, what waits in the buffer
// against its buffering hints and when it will be flushed, records in and delivered over time,
// the objects written lately (linked to the bucket page, previewable there), the records that
// failed and where they went, and "Flush now".
"use strict";

(() => {
  const {el, replace, card, figures, table, chart, poll, fmt, link, badge, act, href} = KS;

  // The bucket page with the object selected (and previewed).
  function objectHref(bucket, key) {
    const folder = key.slice(0, key.lastIndexOf("/") + 1);
    return href("buckets", bucket) + "?prefix=" + encodeURIComponent(folder) + "&key=" + encodeURIComponent(key);
  }

  function folderHref(bucket, key) {
    const folder = key.slice(0, key.lastIndexOf("/") + 1);
    return href("buckets", bucket) + "?prefix=" + encodeURIComponent(folder);
  }

  const missing = (what) => el("span", {class: "health bad", title: "not found in this server"}, " (" + what + " not found)");

  function sourceOf(doc) {
    const s = doc.source;
    if (s.type !== "KinesisStreamAsSource") return "Direct PUT";
    return el("span", {}, "Kinesis stream ", link("streams", s.stream), s.exists ? null : missing("stream"));
  }

  function transformOf(dest) {
    const t = dest.transform;
    const others = dest.processors.filter((p) => p !== "Lambda");
    if (!t && !others.length) return el("span", {class: "muted"}, "none");
    return el("span", {},
      t ? [el("span", {}, "Lambda ", link("functions", t.function)), t.exists ? null : missing("function")] : null,
      others.length ? el("span", {class: "muted"}, (t ? " + " : "") + others.join(", ")) : null);
  }

  function conversionOf(dest) {
    const c = dest.conversion;
    if (!c) return el("span", {class: "muted"}, "none");
    return el("span", {}, (c.input || "?") + " → " + (c.output || "?"), c.schema ? el("span", {class: "muted"}, " (" + c.schema + ")") : null);
  }

  function destinationOf(dest) {
    return el("span", {}, "bucket ", link("buckets", dest.bucket), dest.bucket_exists ? null : missing("bucket"),
      el("br"), el("code", {class: "muted"}, dest.prefix));
  }

  // A bar: `value` of `limit`.
  function bar(value, limit) {
    const share = limit > 0 ? Math.min(1, value / limit) : (value > 0 ? 1 : 0);
    return el("div", {class: "bar", title: (share * 100).toFixed(1) + "%"},
      el("span", {style: {width: (share * 100).toFixed(2) + "%"}}));
  }

  function drawBuffer(box, nextFlush, buffer) {
    if (!buffer) {
      replace(box, el("p", {class: "empty"}, "No delivery worker runs for this delivery stream (it is being created or deleted)."));
      replace(nextFlush, "–");
      return;
    }
    const waited = buffer.oldest ? Math.max(0, buffer.now - buffer.oldest) : 0;
    const interval = buffer.scaled_interval_s * 1000;
    const rows = [
      ["Bytes", fmt.bytes(buffer.bytes) + " of " + buffer.size_mib + " MiB", bar(buffer.bytes, buffer.size_bytes)],
      ["Records", fmt.num(buffer.records), null],
      ["Oldest waited", buffer.oldest ? fmt.ms(waited) + " of " + fmt.ms(interval) : "–", bar(waited, interval)],
    ];
    replace(box, el("table", {class: "grid"}, el("tbody", {}, rows.map(([label, value, gauge]) =>
      el("tr", {}, el("th", {}, label), el("td", {class: "num"}, value), el("td", {style: {width: "50%"}}, gauge))))));
    let text;
    if (!buffer.records) text = "nothing buffered";
    else if (buffer.flush_requested) text = "flushing now";
    else if (buffer.next_flush_in_ms === 0) text = "now";
    else text = "in " + fmt.ms(buffer.next_flush_in_ms) + " (" + fmt.time(buffer.next_flush) + ")";
    replace(nextFlush, text);
  }

  function drawTotals(box, doc) {
    const m = doc.metrics;
    const r = doc.rates || {};
    if (!m) { replace(box, el("p", {class: "empty"}, "–")); return; }
    replace(box, figures([
      ["In", fmt.rate(r.records_in, "records")],
      ["Delivered", fmt.rate(r.records_out, "records")],
      ["Records delivered", fmt.num(m["DeliveryToS3.Records"])],
      ["Bytes delivered", fmt.bytes(m["DeliveryToS3.Bytes"])],
      ["Objects", fmt.num(m["DeliveryToS3.ObjectCount"])],
      ["Error output", fmt.num(m["ErrorOutput.Records"])],
      ["Dropped", fmt.num(m["DroppedRecords"])],
      ["Last delivery", m.LastDeliveryTimestamp ? fmt.ago(m.LastDeliveryTimestamp) : "never"],
    ]));
  }

  function drawObjects(box, objects) {
    replace(box, table([
      {key: "time", label: "Written", fmt: (t) => fmt.time(t)},
      {key: "kind", label: "", fmt: (k, o) => k === "data" ? el("span", {class: "badge good"}, "data")
        : el("span", {class: "badge " + (k === "error" ? "bad" : "busy")}, o.output_type || k)},
      {key: "key", label: "Key", cls: "name", fmt: (k, o) => el("a", {href: objectHref(o.bucket, k), title: "open in " + o.bucket}, KS.breakable(k))},
      {key: "size", label: "Size", cls: "num", fmt: fmt.bytes},
      {key: "records", label: "Records", cls: "num", fmt: fmt.num},
    ], objects, {id: "delivered-objects", rowId: (o) => o.key, empty: "No object written since the server started."}));
  }

  function drawFailures(box, doc) {
    const m = doc.metrics || {};
    const parts = [table([
      {key: "output_type", label: "Error output", fmt: (t) => el("span", {class: "badge bad"}, t)},
      {key: "code", label: "Error code", fmt: (c) => el("code", {}, c)},
      {key: "records", label: "Records", cls: "num", fmt: fmt.num},
      {key: "message", label: "Latest message", cls: "wrap"},
      {key: "key", label: "Went to", cls: "wrap", fmt: (k, f) => el("span", {},
        el("a", {href: folderHref(f.bucket, k)}, f.bucket + "/" + k.slice(0, k.lastIndexOf("/") + 1)), " ",
        el("a", {href: objectHref(f.bucket, k), class: "muted"}, "(latest object)"))},
      {key: "time", label: "Latest", fmt: (t) => fmt.ago(t)},
    ], doc.failures, {rowId: (f) => f.output_type + ":" + f.code, empty: "No record failed processing, conversion or delivery."})];
    if (m.LastError) {
      parts.push(el("p", {class: "health bad"}, "Last failed attempt (", fmt.num(m.FailedAttempts), " in all) ",
        fmt.ago(m.LastErrorTimestamp), ": ", el("code", {}, m.LastError)));
    }
    replace(box, parts);
  }

  KS.route("/delivery-streams/:name", (root, {name}) => {
    const api = "delivery-streams/" + encodeURIComponent(name);
    const state = el("span");
    const subtitle = el("p", {class: "subtitle"});
    const config = el("div", {id: "delivery-figures"});
    const bufferBox = el("div", {id: "buffer"});
    const nextFlush = el("strong", {id: "next-flush"}, "–");
    const totals = el("div");
    const objects = el("div");
    const failures = el("div", {id: "delivery-failures"});
    const records = chart([{key: "records_in", label: "in"}, {key: "records_out", label: "delivered"},
      {key: "records_failed", label: "failed", color: "#d43c3c"}], {id: "chart-records"});
    const bytes = chart([{key: "bytes_in", label: "in"}, {key: "bytes_out", label: "delivered"}], {id: "chart-bytes", format: fmt.bytes});
    let refresh = null;
    const flushButton = el("button", {id: "flush-submit", class: "primary", title: "Deliver what is buffered now, as if the interval had elapsed",
      onclick: async () => {
        flushButton.disabled = true;
        try {
          await act(api + "/flush", {}, (r) => !r.done ? "Flush under way (not finished within 10 s)"
            : r.objects.length ? "Flushed: " + r.objects.map((o) => fmt.count(o.records, "record") + " to " + o.key).join(", ")
            : "Nothing was buffered", () => refresh && refresh());
        } catch (err) { /* act told the user */ }
        flushButton.disabled = false;
      }}, "Flush now");

    replace(root,
      el("h1", {}, el("span", {class: "kind"}, "Delivery stream"), el("span", {}, KS.breakable(name)), state),
      subtitle,
      card("Source and destination", config, {cls: "wide"}),
      el("div", {class: "cards"},
        card("Buffer", [bufferBox, el("p", {}, "Next flush: ", nextFlush)], {tools: flushButton}),
        card("Delivery", totals)),
      el("div", {class: "cards"},
        card("Records per second", records.node),
        card("Bytes per second", bytes.node)),
      card("Objects written", objects, {cls: "wide"}),
      card("Failed records", failures, {cls: "wide"}));

    refresh = poll(api, 1000, (doc) => {
      const dest = doc.destination;
      replace(state, badge(doc.state));
      replace(subtitle, doc.arn, " · ", doc.type === "DirectPut" ? "Direct PUT" : "Kinesis stream as source",
        " · version ", doc.version, " · created ", fmt.time(doc.created));
      replace(config, figures([
        ["Source", sourceOf(doc)],
        ["Transform", transformOf(dest)],
        ["Format conversion", conversionOf(dest)],
        dest.conversion ? null : ["Compression", dest.compression === "UNCOMPRESSED" ? el("span", {class: "muted"}, "none") : dest.compression],
        ["Destination", destinationOf(dest)],
        ["Error output", el("code", {class: "muted"}, dest.error_prefix || "(the prefix) + error type")],
        ["Buffering hints", (doc.buffer ? doc.buffer.size_mib + " MiB · " + doc.buffer.interval_s + " s" : "–")],
        dest.backup ? ["Backup", el("span", {}, link("buckets", dest.backup.bucket), " ", el("code", {class: "muted"}, dest.backup.prefix))] : null,
        dest.dynamic_partitioning ? ["Dynamic partitioning", "enabled"] : null,
      ].filter(Boolean)));
      drawBuffer(bufferBox, nextFlush, doc.buffer);
      drawTotals(totals, doc);
      if (doc.series) { records.set(doc.series); bytes.set(doc.series); }
      drawObjects(objects, doc.objects);
      drawFailures(failures, doc);
    });
  }, (params) => params.name);
})();
