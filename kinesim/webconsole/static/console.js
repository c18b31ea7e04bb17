// kinesim's web console: the shell every page shares. No framework, no build step: each file in
// pages/ registers its pages with KS.route, and the shell draws the one the path names.
// The page polls the console's JSON API (in-process state, cheap to read) while it is visible.
"use strict";

const KS = (() => {
  const PREFIX = "/_kinesim/console";
  const API = PREFIX + "/api";
  const routes = [];
  const pollers = [];
  let lastOk = null;

  // ---------------------------------------------------------------- the account and region
  // The page's ?account=&region= (either left out: the server's own). Every API call and every
  // console link carries them on, so that a view, its polls and the pages it links to all show
  // the same account and region.
  const SCOPE_ARGS = ["account", "region"];
  const scope = {};
  for (const [name, value] of new URLSearchParams(location.search)) if (SCOPE_ARGS.includes(name) && value) scope[name] = value;

  // `url` with the page's account and region when it is a console URL (a path under PREFIX: a
  // page or its API); any other (another site, "#") as it is.
  function scoped(url) {
    if (!Object.keys(scope).length || !String(url).startsWith(PREFIX)) return url;
    const u = new URL(url, location.origin);
    for (const [name, value] of Object.entries(scope)) u.searchParams.set(name, value);
    return u.pathname + u.search + u.hash;
  }

  // ---------------------------------------------------------------- DOM
  // el("div", {class: "x", onclick: f, dataset: {k: "v"}}, "text", child, [more, children])
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (key === "dataset") Object.assign(node.dataset, value);
      else if (key === "style" && typeof value === "object") Object.assign(node.style, value);
      else if (key === "href" && tag === "a") node.setAttribute(key, scoped(value));
      else node.setAttribute(key, value === true ? "" : value);
    }
    append(node, children);
    return node;
  }

  function append(node, children) {
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function replace(node, ...children) {
    node.replaceChildren();
    return append(node, children);
  }

  // ---------------------------------------------------------------- formatting
  const fmt = {
    num(n) { return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US", {maximumFractionDigits: 1}); },
    bytes(n) {
      if (n === null || n === undefined) return "–";
      const units = ["B", "KiB", "MiB", "GiB", "TiB"];
      let i = 0;
      while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
      return (i ? n.toFixed(1) : fmt.num(n)) + " " + units[i];
    },
    rate(n, unit) { return n === null || n === undefined ? "–" : fmt.num(n) + " " + (unit || "") + "/s"; },
    ms(n) {
      if (n === null || n === undefined) return "–";
      if (n > 0 && n < 10) return n.toFixed(n < 1 ? 2 : 1) + " ms";  // warm invocations take well under 1 ms
      if (n < 1000) return Math.round(n) + " ms";
      if (n < 60000) return (n / 1000).toFixed(1) + " s";
      if (n < 3600000) return (n / 60000).toFixed(1) + " min";
      return (n / 3600000).toFixed(1) + " h";
    },
    // epoch milliseconds (or an ISO string) as local date and time
    time(t) {
      if (t === null || t === undefined || t === "") return "–";
      const d = new Date(typeof t === "number" ? t : Date.parse(t));
      return isNaN(d) ? String(t) : d.toLocaleString("sv-SE").replace(" ", " ") + "." + String(d.getMilliseconds()).padStart(3, "0");
    },
    ago(t) {
      if (t === null || t === undefined) return "–";
      const ms = Date.now() - (typeof t === "number" ? t : Date.parse(t));
      return ms < 0 ? "now" : fmt.ms(ms) + " ago";
    },
    // "object" for 1, "objects" (or `many`) for any other count
    plural(n, noun, many) { return Number(n) === 1 ? noun : many || noun + "s"; },
    // a count and its noun: "1 object", "1,024 objects"
    count(n, noun, many) { return fmt.num(n) + " " + fmt.plural(n, noun, many); },
  };

  // A name with line-break opportunities (<wbr>) where a reader would break it: after - _ . / : @
  // and between a lower-case letter or digit and an upper-case one ("Enrich|Function"), so a long
  // name in a narrow column wraps there, never mid-word.
  function breakable(name) {
    const text = String(name);
    const parts = text.split(/(?<=[-_./:@])|(?<=[a-z0-9])(?=[A-Z])/);
    return parts.length < 2 ? text : parts.flatMap((part, i) => i ? [el("wbr"), part] : [part]);
  }

  // ---------------------------------------------------------------- the API
  async function request(method, path, body) {
    const init = {method, headers: {Accept: "application/json"}, cache: "no-store"};
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(scoped(path.startsWith("/") ? path : API + "/" + path), init);
    const text = await response.text();
    let doc = null;
    try { doc = text ? JSON.parse(text) : null; } catch (e) { doc = {message: text}; }
    if (!response.ok) {
      const err = new Error((doc && (doc.message || doc.Message)) || response.status + " " + response.statusText);
      err.status = response.status;
      err.code = doc && doc.code;
      throw err;
    }
    return doc;
  }
  const get = (path) => request("GET", path);
  const post = (path, body) => request("POST", path, body || {});

  // Call fn(doc) with `path`'s answer now and every `ms` while the page is open and visible.
  // Returns a function that polls again at once (after an action).
  function poll(path, ms, fn) {
    let timer = null, busy = false, lastError = null;
    const run = async () => {
      if (busy) return;  // the call under way schedules the next one
      busy = true;
      clearTimeout(timer);
      if (!document.hidden) {
        let doc;
        try {
          doc = await get(typeof path === "function" ? path() : path);
          live(true);
        } catch (err) {
          live(err.status !== undefined, err);  // an answer, even an error, means the server is up
          if (err.status !== undefined && err.message !== lastError) notice(err.message, "error");
          lastError = err.message;
        }
        if (doc !== undefined) {
          lastError = null;
          try { fn(doc); } catch (err) { console.error(err); notice("the page failed to draw: " + err.message, "error"); }
        }
      }
      busy = false;
      timer = setTimeout(run, ms);
    };
    pollers.push(run);
    run();
    return run;
  }

  function live(ok, err) {
    const badge = document.getElementById("live");
    if (!badge) return;
    if (ok) lastOk = Date.now();
    badge.className = ok ? "live ok" : "live down";
    badge.textContent = ok ? "live" : "server unreachable";
    badge.title = ok ? "updated " + fmt.time(lastOk) : String(err && err.message);
  }

  // A message at the top of the page (actions' results, errors).
  function notice(text, kind) {
    const box = document.getElementById("notice");
    if (!box) return;
    const item = el("div", {class: "notice " + (kind || "info"), role: kind === "error" ? "alert" : "status"}, text,
      el("button", {class: "close", title: "dismiss", onclick: () => item.remove()}, "×"));
    box.append(item);
    if (kind !== "error") setTimeout(() => item.remove(), 8000);
  }

  // Run an action (a POST); tell the user how it went; then `after(result)`.
  async function act(path, body, done, after) {
    try {
      const result = await post(path, body);
      if (done) notice(typeof done === "function" ? done(result) : done, "ok");
      if (after) after(result);
      return result;
    } catch (err) {
      notice(err.message, "error");
      throw err;
    }
  }

  // ---------------------------------------------------------------- building blocks
  // table([{key, label, fmt(value, row), cls}], rows, {empty, id, rowId(row)})
  function table(columns, rows, opts) {
    opts = opts || {};
    if (!rows || !rows.length) return el("p", {class: "empty", id: opts.id}, opts.empty || "none");
    return el("table", {class: "grid", id: opts.id},
      el("thead", {}, el("tr", {}, columns.map((c) => el("th", {class: c.cls}, c.label)))),
      el("tbody", {}, rows.map((row) => el("tr", {dataset: opts.rowId ? {id: opts.rowId(row)} : undefined},
        columns.map((c) => {
          const value = typeof c.key === "function" ? c.key(row) : row[c.key];
          return el("td", {class: c.cls}, c.fmt ? c.fmt(value, row) : value === null || value === undefined ? "–" : value);
        })))));
  }

  // A titled box; `body` may be replaced later with replace(box.body, ...).
  function card(title, body, opts) {
    opts = opts || {};
    const inner = el("div", {class: "card-body"}, body);
    const box = el("section", {class: "card " + (opts.cls || ""), id: opts.id},
      el("h2", {}, title, opts.tools ? el("span", {class: "tools"}, opts.tools) : null), inner);
    box.body = inner;
    return box;
  }

  // Key figures: [[label, value], ...]
  function figures(pairs) {
    return el("dl", {class: "figures"}, pairs.map(([label, value]) => el("div", {},
      el("dt", {}, label), el("dd", {}, value === null || value === undefined ? "–" : value))));
  }

  function badge(state) {
    const s = String(state || "unknown");
    const kind = /^(ACTIVE|Enabled|RUNNING|running|OPEN|open|OK|ok|Active|Successful|CREATE_COMPLETE|UPDATE_COMPLETE)$/.test(s) ? "good"
      : /(FAIL|ERROR|error|failed|Failed|Disabled|STOPPED|stopped|down|DELETING|CLOSED|closed)/.test(s) ? "bad" : "busy";
    return el("span", {class: "badge " + kind}, s);
  }

  // The console's page of a resource: link(kind, name) with kind one of streams, functions,
  // delivery-streams, buckets, queries, queues, topics, log-groups.
  function href(kind, name) {
    return PREFIX + "/" + kind + (name !== undefined ? "/" + encodeURIComponent(name) : "");
  }
  function link(kind, name, text) {
    return el("a", {href: href(kind, name)}, text === undefined ? name : text);
  }

  // A time-series chart (uPlot). series: [{key, label, color, unit}], drawn from points as the
  // API gives them: {t: [epoch s...], key: [values...]}. Returns {node, set(points)}.
  const COLORS = ["#2f6fdf", "#e0692d", "#2a9d5c", "#b33fb3", "#c9a400", "#d43c3c", "#1aa3a3"];
  const AXIS_FONT = "11px system-ui, sans-serif";
  const MIN_SPAN_S = 60;  // the least time a chart spans, while its points cover less
  // Time labels on one line, as precise as the ticks are apart: "11:34" or "11:34:30". uPlot's
  // own put a date under the first tick ("11/29/26 11:33am"), which overlapped the next label
  // and was cut at the chart's left edge.
  function timeLabels(u, splits, axis, space, incr) {
    return splits.map((t) => {
      const clock = new Date(t * 1000).toTimeString();
      return incr % 60 ? clock.slice(0, 8) : clock.slice(0, 5);
    });
  }
  // The width of the value axis: its longest label, measured, so that "0.50 ms" is never cut.
  function valueAxisSize(u, values, axis, cycle) {
    const a = u.axes[axis];
    if (cycle > 1) return a._size;
    u.ctx.font = a.font ? a.font[0] : AXIS_FONT;
    const widest = Math.max(0, ...(values || []).map((v) => u.ctx.measureText(v).width / devicePixelRatio));
    return Math.max(40, Math.ceil(widest + a.ticks.size + a.gap + 4));
  }
  // The x range: the points' own, widened to MIN_SPAN_S while they cover less (one point, or
  // none, made uPlot span years).
  function timeRange(u, min, max) {
    const now = Date.now() / 1000;
    if (min === null || max === null || !isFinite(min) || !isFinite(max)) return [now - MIN_SPAN_S, now];
    return max - min < MIN_SPAN_S ? [max - MIN_SPAN_S, max] : [min, max];
  }
  function chart(series, opts) {
    opts = opts || {};
    const node = el("div", {class: "chart", id: opts.id});
    let plot = null;
    const make = (points) => {
      const width = Math.max(240, node.clientWidth || 480);
      plot = new uPlot({
        width, height: opts.height || 160, legend: {show: true}, cursor: {drag: {x: false, y: false}},
        // Room on the right for half of the last time label (uPlot centres labels on their ticks).
        padding: [10, 28, 0, 4],
        scales: {x: {time: true, range: timeRange}},
        axes: [
          // At least 80 px between time ticks: labels ("11:34:30", ~50 px) never touch.
          {stroke: "#667", font: AXIS_FONT, space: 80, size: 30, values: timeLabels},
          {stroke: "#667", font: AXIS_FONT, size: valueAxisSize,
           values: (u, vals) => vals.map((v) => opts.format ? opts.format(v) : fmt.num(v))},
        ],
        series: [{}].concat(series.map((s, i) => ({label: s.label, stroke: s.color || COLORS[i % COLORS.length],
          width: 1.5, fill: (s.color || COLORS[i % COLORS.length]) + "22", points: {show: false},
          value: (u, v) => v === null || v === undefined ? "–" : (opts.format ? opts.format(v) : fmt.num(v))}))),
      }, data(points), node);
      node.plot = plot;  // for the browser tests, which check where its labels fall
    };
    const data = (points) => [points.t || []].concat(series.map((s) => points[s.key] || []));
    return {
      node,
      set(points) {
        if (!points) return;
        if (!plot) make(points); else plot.setData(data(points));
      },
    };
  }

  // The header's account and region: the ones shown, and a choice of every pair the server has
  // (GET /api/scopes); choosing one reloads this view in it.
  async function drawScope() {
    const box = document.getElementById("scope");
    if (!box) return;
    let doc;
    try { doc = await get("scopes"); } catch (err) { return; }  // the polls tell of a server down
    const key = (s) => s.account + " · " + s.region;
    const own = key(doc.own);
    const current = key({account: scope.account || doc.own.account, region: scope.region || doc.own.region});
    const options = doc.scopes.map((s) => el("option", {value: key(s), selected: key(s) === current},
      key(s) + (key(s) === own ? " (server's own)" : "")));
    if (!doc.scopes.some((s) => key(s) === current)) {
      options.push(el("option", {value: current, selected: true, disabled: true}, current + " (not in use)"));
    }
    const choose = (value) => {
      const [account, region] = value.split(" · ");
      const url = new URL(location.href);
      for (const [name, v] of [["account", account], ["region", region]]) {
        if (value === own) url.searchParams.delete(name); else url.searchParams.set(name, v);
      }
      location.assign(url);
    };
    replace(box, el("label", {title: "the AWS account and region this console shows"}, "account · region ",
      el("select", {id: "scope-select", onchange: (e) => choose(e.target.value)}, options)));
  }

  // ---------------------------------------------------------------- pages and the router
  // route("/streams/:name", (root, params) => { ...draw into root... })
  function route(pattern, draw, title) {
    const names = [];
    const regex = new RegExp("^" + pattern.replace(/\/:([a-zA-Z]+)/g, (_, n) => { names.push(n); return "/([^/]+)"; }) + "/?$");
    routes.push({regex, names, draw, title});
  }

  function start() {
    let path = location.pathname.slice(PREFIX.length) || "/";
    const main = document.getElementById("main");
    for (const a of document.querySelectorAll("header a")) a.setAttribute("href", scoped(a.getAttribute("href")));
    drawScope();
    for (const r of routes) {
      const m = r.regex.exec(path);
      if (!m) continue;
      const params = {};
      r.names.forEach((n, i) => { params[n] = decodeURIComponent(m[i + 1]); });
      document.title = (r.title ? r.title(params) + " · " : "") + "kinesim console";
      for (const a of document.querySelectorAll("nav a")) if (a.pathname === location.pathname) a.classList.add("here");
      r.draw(main, params);
      return;
    }
    replace(main, el("h1", {}, "No such page"), el("p", {}, "The console has no page at ", el("code", {}, location.pathname), ". ",
      link("", undefined, "Go to the overview")));
  }

  window.addEventListener("DOMContentLoaded", start);
  // A hidden tab does not poll; shown again, it catches up at once.
  document.addEventListener("visibilitychange", () => { if (!document.hidden) for (const run of pollers) run(); });

  return {PREFIX, API, el, append, replace, fmt, get, post, poll, act, notice, table, card, figures, badge, href, link,
          breakable, chart, route, scope, scoped};
})();
