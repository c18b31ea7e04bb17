// The bucket page: one level of the bucket at a time (?prefix=P, its folders and objects), a
// bounded preview of an object (JSON, text, gzip, Parquet, ORC; hex for the rest; ?key=K opens
// one) and downloads.
"use strict";

(() => {
  const {el, replace, card, table, poll, fmt, link, href, get, notice, API} = KS;
  const CELL_CHARS = 200;
  const SMALL = {padding: "1px 8px", fontSize: "12.5px"};

  function pageHref(bucket, prefix) {
    return href("buckets", bucket) + (prefix ? "?prefix=" + encodeURIComponent(prefix) : "");
  }

  function apiPath(bucket, what, key) {
    return API + "/buckets/" + encodeURIComponent(bucket) + "/" + what + "?key=" + encodeURIComponent(key);
  }

  // A value in a preview's table cell: text as it is, anything else as compact JSON, cut short.
  function cell(value) {
    if (value === null || value === undefined) return el("span", {class: "muted"}, "null");
    const text = typeof value === "string" ? value : JSON.stringify(value);
    return text.length > CELL_CHARS ? el("span", {title: text.slice(0, 2000)}, text.slice(0, CELL_CHARS) + "…") : text;
  }

  function previewBody(doc) {
    const notes = [];
    const what = [doc.format, doc.compression ? "(" + doc.compression + ")" : null].filter(Boolean).join(" ");
    notes.push(el("span", {class: "badge busy"}, what));
    notes.push(" ", fmt.bytes(doc.size), " · ", doc.content_type, doc.content_encoding ? " · Content-Encoding " + doc.content_encoding : null);
    if (doc.kind === "table") notes.push(" · ", fmt.count(doc.total_rows, "row"), doc.row_groups !== undefined ? " in " + fmt.count(doc.row_groups, "row group") : "");
    if (doc.truncated) {
      notes.push(el("span", {class: "muted"}, doc.kind === "binary" ? " · first 1 KiB shown"
        : doc.rows && doc.rows.length ? " · first " + fmt.count(doc.rows.length, "row") + " shown" : " · first 64 KiB shown"));
    }
    if (doc.note) notes.push(el("p", {class: "health"}, doc.note));
    const parts = [el("p", {}, notes)];
    if (doc.kind === "empty") parts.push(el("p", {class: "empty"}, "The object is empty."));
    if (doc.columns && doc.rows) {
      parts.push(el("div", {style: {overflow: "auto", maxHeight: "480px"}}, el("table", {class: "grid"},
        el("thead", {}, el("tr", {}, el("th", {}, "#"), doc.columns.map((c) => el("th", {title: c.type || ""}, c.name,
          c.type ? el("span", {class: "muted"}, " " + c.type) : null)))),
        el("tbody", {}, doc.rows.map((row, i) => el("tr", {}, el("td", {class: "muted"}, i + 1), row.map((v) => el("td", {class: "wrap", style: {maxWidth: "360px"}}, cell(v)))))))));
    } else if (doc.kind === "json") {
      parts.push(el("pre", {class: "data", style: {maxHeight: "480px"}}, doc.records.map((r) => JSON.stringify(r, null, 2)).join("\n")));
    }
    if (doc.kind === "text" || (doc.kind === "json" && doc.columns)) {
      const raw = el("pre", {class: "data", style: {maxHeight: "480px"}}, doc.text);
      parts.push(doc.kind === "json" ? el("details", {}, el("summary", {class: "muted"}, "as text"), raw) : raw);
    }
    if (doc.kind === "binary") parts.push(el("pre", {class: "data", style: {maxHeight: "480px"}}, doc.hex.join("\n")));
    return parts;
  }

  KS.route("/buckets/:name", (root, {name}) => {
    const search = new URLSearchParams(location.search);
    const prefix = search.get("prefix") || "";
    const after = search.get("after") || "";
    let selected = search.get("key");
    const subtitle = el("p", {class: "subtitle"});
    const crumbs = el("p", {});
    const prefixes = el("div");
    const objects = el("div");
    const more = el("p");
    const preview = el("div", {id: "object-preview"}, el("p", {class: "empty"}, "Choose an object's “Preview”."));
    const previewTitle = el("span", {}, "Preview");

    async function show(key) {
      selected = key;
      const url = new URL(location.href);
      url.searchParams.set("key", key);
      history.replaceState(null, "", url);
      for (const row of document.querySelectorAll("#bucket-objects tr[data-id]")) {
        row.style.background = row.dataset.id === key ? "#eef3fd" : "";
      }
      replace(previewTitle, "Preview: ", el("code", {}, key));
      replace(preview, el("p", {class: "empty"}, "Loading…"));
      try {
        const doc = await get(apiPath(name, "preview", key));
        if (selected === key) replace(preview, previewBody(doc));
      } catch (err) {
        replace(preview, el("p", {class: "health bad"}, err.message));
        notice(err.message, "error");
      }
    }

    replace(root,
      el("h1", {}, el("span", {class: "kind"}, "Bucket"), el("span", {}, KS.breakable(name))),
      subtitle,
      el("div", {class: "cards"},
        card("Objects", [crumbs, el("div", {}, prefixes), objects, more]),
        card(previewTitle, preview)));

    poll(() => "buckets/" + encodeURIComponent(name) + "?prefix=" + encodeURIComponent(prefix) + (after ? "&after=" + encodeURIComponent(after) : ""), 3000, (doc) => {
      replace(subtitle, doc.region, doc.owner ? " · account " + doc.owner : null, " · created ", fmt.time(doc.created),
        doc.writers.length ? [" · written by ", doc.writers.map((w, i) => [i ? ", " : "", link("delivery-streams", w.name),
          w.roles.includes("destination") ? "" : " (" + w.roles.join(", ") + ")"])] : null);
      replace(crumbs, el("span", {class: "muted"}, "Folder: "), el("a", {href: pageHref(name, "")}, name),
        doc.parents.map((p) => [el("span", {class: "muted"}, " / "), el("a", {href: pageHref(name, p.prefix)}, p.name.slice(0, -1))]),
        after ? el("span", {class: "muted"}, " (after " + after + ")") : null);
      replace(prefixes, table([
        {key: "name", label: "Folder", cls: "name", fmt: (n, p) => el("a", {href: pageHref(name, p.prefix)}, KS.breakable(n))},
      ], doc.prefixes, {id: "bucket-prefixes", rowId: (p) => p.prefix, empty: "No subfolder."}));
      replace(objects, table([
        {key: "name", label: "Object", cls: "name", fmt: (n, o) => el("a", {href: "#", title: o.key, style: {display: "inline-block", minWidth: "180px"},
          onclick: (e) => { e.preventDefault(); show(o.key); }}, KS.breakable(n || o.key))},
        {key: "size", label: "Size", cls: "num", fmt: fmt.bytes},
        {key: "last_modified", label: "Last modified", fmt: (t) => fmt.time(t)},
        {key: "key", label: "", fmt: (k) => el("span", {style: {display: "flex", gap: "6px"}},
          el("button", {class: "preview", style: SMALL, onclick: () => show(k)}, "Preview"),
          el("a", {class: "download button", style: SMALL, href: apiPath(name, "download", k), download: k.slice(k.lastIndexOf("/") + 1)}, "Download"))},
      ], doc.objects, {id: "bucket-objects", rowId: (o) => o.key, empty: "No object here."}));
      for (const row of objects.querySelectorAll("tr[data-id]")) {
        if (row.dataset.id === selected) row.style.background = "#eef3fd";
      }
      replace(more, doc.truncated ? el("a", {href: pageHref(name, prefix) + (prefix ? "&" : "?") + "after=" + encodeURIComponent(doc.next_after)},
        "Next " + fmt.count(doc.objects.length, "object") + " →") : null);
    });
    if (selected) show(selected);
  }, (params) => params.name);
})();
