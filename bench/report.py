"""Turning the figures of all targets into the comparison table, the target checks and JSON."""
from __future__ import annotations

PUT_WORKLOADS = ("put1", "putN100", "putN1024")

# (label, key, format, better): better = +1 higher is better, -1 lower is better, 0 no ratio
ROWS = [
    ("PutRecord records/s (1 x 100 B)", "put1.rps", "{:,.0f}", +1),
    ("PutRecords records/s (500 x 100 B)", "putN100.rps", "{:,.0f}", +1),
    ("PutRecords MB/s (500 x 100 B)", "putN100.mbps", "{:,.2f}", +1),
    ("PutRecords records/s (500 x 1 KiB)", "putN1024.rps", "{:,.0f}", +1),
    ("PutRecords MB/s (500 x 1 KiB)", "putN1024.mbps", "{:,.2f}", +1),
    ("GetRecords drain records/s", "drain.rps", "{:,.0f}", +1),
    ("GetRecords drain MB/s", "drain.mbps", "{:,.2f}", +1),
    ("  records drained (preloaded)", "drain.records", "{:,.0f}", 0),
    ("put->visible p50 ms", "lat.p50", "{:,.2f}", -1),
    ("put->visible p99 ms", "lat.p99", "{:,.2f}", -1),
    ("server CPU s / 1k rec: PutRecord", "put1.server_cpu_per_1k", "{:.4f}", -1),
    ("server CPU s / 1k rec: PutRecords 100 B", "putN100.server_cpu_per_1k", "{:.4f}", -1),
    ("server CPU s / 1k rec: PutRecords 1 KiB", "putN1024.server_cpu_per_1k", "{:.4f}", -1),
    ("server CPU s / 1k rec: GetRecords drain", "drain.server_cpu_per_1k", "{:.4f}", -1),
    ("duplicate sequence numbers", "check.dup", "{:,.0f}", 0),
    ("missing records", "check.missing", "{:,.0f}", 0),
    ("failed requests / records", "check.errors", "{:,.0f}", 0),
]

DETAIL_ROWS = [
    ("client cores: PutRecord", "put1.client_cores", "{:.2f}"),
    ("client cores: PutRecords 100 B", "putN100.client_cores", "{:.2f}"),
    ("client cores: PutRecords 1 KiB", "putN1024.client_cores", "{:.2f}"),
    ("client cores: GetRecords drain", "drain.client_cores", "{:.2f}"),
    ("client cores: latency consumer", "lat.client_cores", "{:.2f}"),
    ("server cores: PutRecord", "put1.server_cores", "{:.2f}"),
    ("server cores: PutRecords 100 B", "putN100.server_cores", "{:.2f}"),
    ("server cores: PutRecords 1 KiB", "putN1024.server_cores", "{:.2f}"),
    ("server cores: GetRecords drain", "drain.server_cores", "{:.2f}"),
    ("server cores: latency (polling)", "lat.server_cores", "{:.2f}"),
    ("latency: records put / seen", "lat.sent_seen", "{}"),
    ("latency: producer rate /s", "lat.rate", "{:,.0f}"),
    ("latency: consumer polls", "lat.polls", "{:,.0f}"),
    ("latency: p90 / max ms", "lat.p90_max", "{}"),
    ("drain: GetRecords calls", "drain.pages", "{:,.0f}"),
    ("drain: missing / extra", "drain.missing_extra", "{}"),
] + [
    (f"{w} read-back: acked / read", f"{w}.acked_read", "{}") for w in PUT_WORKLOADS
] + [
    (f"{w} read-back: dup acked / dup read", f"{w}.dups", "{}") for w in PUT_WORKLOADS
] + [
    (f"{w} read-back: missing / never acked", f"{w}.missing_unacked", "{}") for w in PUT_WORKLOADS
] + [
    (f"{w}: failures", f"{w}.errors_text", "{}") for w in PUT_WORKLOADS + ("drain",)
]

RATIOS = [("kinesim", "kinesalite"), ("kinesim", "moto"), ("kinesim", "kinesim-mem")]


def derive(fig: dict) -> dict:
    """Add the summary figures (totals over workloads, combined cells) to one target's figures."""
    out = dict(fig)

    def g(key, default=0):
        v = fig.get(key)
        return default if v is None else v

    out["check.dup"] = sum(g(f"{w}.check.dup_acked") + g(f"{w}.check.dup_read") for w in PUT_WORKLOADS) \
        + g("lat.dups")
    out["check.missing"] = sum(g(f"{w}.check.missing") for w in PUT_WORKLOADS) \
        + g("drain.check.missing") + g("lat.missing")
    out["check.errors"] = sum(sum((fig.get(f"{w}.errors") or {}).values()) for w in PUT_WORKLOADS + ("drain",)) \
        + g("lat.put_errors")
    if "lat.sent" in fig:
        out["lat.sent_seen"] = f"{fig['lat.sent']:,} / {fig['lat.seen']:,}"
        out["lat.p90_max"] = f"{fmt_value(fig.get('lat.p90'), '{:.2f}')} / {fmt_value(fig.get('lat.max'), '{:.2f}')}"
    if "drain.records" in fig:
        out["drain.missing_extra"] = f"{fig['drain.check.missing']:,} / {fig['drain.check.extra']:,}"
    for w in PUT_WORKLOADS:
        if f"{w}.check.acked" in fig:
            c = lambda k: fig[f"{w}.check.{k}"]  # noqa: E731
            out[f"{w}.acked_read"] = f"{c('acked'):,} / {c('read'):,}"
            out[f"{w}.dups"] = f"{c('dup_acked'):,} / {c('dup_read'):,}"
            out[f"{w}.missing_unacked"] = f"{c('missing'):,} / {c('unacked_read'):,}"
    for w in PUT_WORKLOADS + ("drain",):
        if f"{w}.errors" in fig:
            errs = fig[f"{w}.errors"]
            out[f"{w}.errors_text"] = ", ".join(f"{k} {v:,}" for k, v in sorted(errs.items())) or "-"
    return out


def fmt_value(v, fmt: str) -> str:
    if v is None:
        return "-"
    try:
        return fmt.format(v)
    except (ValueError, TypeError):
        return str(v)


def ratio(a, b) -> float | None:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b:
        return a / b
    return None


def text_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    line = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)  # noqa: E731
                                   for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(header), "  ".join("-" * w for w in widths)] + [line(r) for r in rows])


def metrics_table(figs: dict[str, dict], targets: list[str], rows: list[tuple], pairs: list[tuple[str, str]],
                  skip_empty: bool = False) -> str:
    """One line per (label, key, format, better) row: each target's figure, then the ratio a/b of
    each pair where `better` is set. `skip_empty` leaves out rows no target has a figure for."""
    header = ["metric"] + targets + [f"{a}/{b}" for a, b in pairs]
    lines = []
    for label, key, fmt, better in rows:
        cells = [label] + [fmt_value(figs[t].get(key), fmt) for t in targets]
        for a, b in pairs:
            r = ratio(figs[a].get(key), figs[b].get(key)) if better else None
            cells.append("-" if r is None else f"{r:.2f}x")
        if not skip_empty or any(c != "-" for c in cells[1:]):
            lines.append(cells)
    return text_table(header, lines)


def main_table(figs: dict[str, dict], targets: list[str]) -> str:
    return metrics_table(figs, targets, ROWS, [(a, b) for a, b in RATIOS if a in targets and b in targets])


def detail_table(figs: dict[str, dict], targets: list[str]) -> str:
    rows = [[label] + [fmt_value(figs[t].get(key), fmt) for t in targets] for label, key, fmt in DETAIL_ROWS]
    rows = [r for r in rows if any(c != "-" for c in r[1:])]
    return text_table(["detail"] + targets, rows)


def checks(figs: dict[str, dict], targets: list[str]) -> list[dict]:
    """The issue's targets, each PASS / MISS (or n/a when a target was not run)."""
    me = "kinesim" if "kinesim" in targets else "kinesim-mem" if "kinesim-mem" in targets else None
    out = []

    def add(label, value, ok):
        out.append({"check": label, "value": value, "result": "n/a" if ok is None else "PASS" if ok else "MISS"})

    speed = [("put1.rps", "PutRecord/s"), ("putN100.rps", "PutRecords records/s (500 x 100 B)"),
             ("drain.rps", "GetRecords drain records/s")]
    for peer, factor in (("kinesalite", 2), ("moto", 10)):
        for key, what in speed:
            r = ratio(figs.get(me, {}).get(key), figs.get(peer, {}).get(key))
            add(f"{me or 'kinesim'} {what} >= {factor}x {peer}", "-" if r is None else f"{r:.2f}x",
                None if r is None else r >= factor)
    for t in ("kinesim", "kinesim-mem"):
        if t in targets:
            p50 = figs[t].get("lat.p50")
            add(f"{t} put->visible p50 <= 2 ms", fmt_value(p50, "{:.2f} ms"), None if p50 is None else p50 <= 2.0)
    if "kinesim" in targets and "kinesim-mem" in targets:
        for key, what in speed + [("putN1024.rps", "PutRecords records/s (500 x 1 KiB)")]:
            r = ratio(figs["kinesim"].get(key), figs["kinesim-mem"].get(key))
            add(f"durable {what} within 20% of in-memory", "-" if r is None else f"{r:.2f}x",
                None if r is None else r >= 0.8)
    for t in ("kinesim", "kinesim-mem"):
        if t in targets:
            f = figs[t]
            ok = f.get("check.dup") == 0 and f.get("check.missing") == 0 and not f.get("error")
            add(f"{t} no duplicate / missing records", f"dup {f.get('check.dup')}, missing {f.get('check.missing')}",
                ok)
    return out


def checks_table(rows: list[dict]) -> str:
    return text_table(["target", "value", "result"], [[r["check"], r["value"], r["result"]] for r in rows])
