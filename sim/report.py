"""The compact terminal summary printed after a run: fits 80 columns, lines break only between phrases.

The first line is the verdict (`PASS` or `FAIL: <the SLOs it misses>`, sim/results/gate.py); then a latency
table with the run-wide verdicts, a per-class x per-pool verdict table, the diagnosis of what missed (sim/review),
then requests, throughput and cost, pools, the cost model's provenance and the invariants.
"""
from __future__ import annotations

from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from sim.results.gate import verdict_line
from sim.results.text import SLO_LABEL, finding_lines, mark, target, wrap
from sim.terminal import WIDTH, ms


def _mark(met) -> str:
    """A verdict: ✓ met, ✗ missed, `no data` when nothing was measured (never a pass)."""
    return "no data" if met is None else ("✓" if met else "✗")


def _pct(x, digits: int) -> str:
    return "no data" if x is None else f"{x:.{digits}%}"


def _cell(r: dict | None, slo: str) -> str:
    if r is None:
        return "-"
    x = r["achieved"]
    if x is None or x != x:
        v = "no data"
    elif slo == "served_fraction":
        v = f"{x:.2%}"
    else:
        v = f"{x * 1e3:,.1f}"
    return f"{v} {mark(r['status'])}" if r["status"] != "no_data" else v


def verdict_table(records: list[dict]) -> tuple[Table | None, list[str]]:
    """One row per class x pool (the all-pools row only for a class served on more than one pool), and the
    targets as lines under it."""
    cells: dict[tuple[str, str], dict] = {}
    for r in records:
        if r["class"] != "all":
            cells.setdefault((r["class"], r["pool"]), {})[r["slo"]] = r
    if not cells:
        return None, []
    pools_of: dict[str, int] = {}
    for c, p in cells:
        if p != "all":
            pools_of[c] = pools_of.get(c, 0) + 1
    t = Table(title="SLO verdicts by class and pool", box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False,
              show_edge=False)
    for name, just in (("class @ pool", "left"), ("requests", "right"), ("TTFT P99 ms", "right"),
                       ("TPOT P99 ms", "right"), ("served", "right")):
        t.add_column(name, justify=just, no_wrap=True)
    targets: dict[str, list[str]] = {}
    for (c, p), row in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1] == "all", kv[0][1])):
        key = ", ".join(f"{SLO_LABEL[k].split()[0]} {target(k, row[k]['target'])}" for k in ("ttft_p99", "tpot_p99")
                        if k in row)
        targets.setdefault(key, [])
        if c not in targets[key]:
            targets[key].append(c)
        if p == "all" and pools_of.get(c, 0) == 1:
            continue
        ttft, tpot, srv = (row.get(k) for k in ("ttft_p99", "tpot_p99", "served_fraction"))
        t.add_row(f"{c} @ {p}", f"{ttft['requests']:,}" if ttft else "-", _cell(ttft, "ttft_p99"),
                  _cell(tpot, "tpot_p99"), _cell(srv, "served_fraction"))
    lines = wrap([f"targets: {k} ({', '.join(v)})" for k, v in targets.items()], WIDTH, "")
    return t, lines


def print_summary(s: dict, run_dir: Path | str) -> None:
    console = Console(highlight=False, width=WIDTH, soft_wrap=True)
    say = console.print
    say(verdict_line(s), markup=False)  # first line: the gate (`PASS` / `FAIL: ...`), for automated review
    if s.get("status") == "interrupted":
        say(f"[bold]interrupted[/bold] at simulated t = {s['simulated_duration_s']:,.1f} s: "
            "figures cover what was simulated")
    req, lat, slo, cost = s["requests"], s["latency_s"], s["slo"], s["cost"]
    t = Table(title=f"inferplan · {s['scenario']} · seed {s['seed']} · {s['simulated_duration_s']:,.0f} s simulated")
    t.add_column("metric")
    t.add_column("p50", justify="right")
    t.add_column("p90", justify="right")
    t.add_column("p99", justify="right")
    t.add_column("mean", justify="right")
    t.add_column("SLO (p99)", justify="right")
    for key, tgt in (("ttft", slo["ttft_p99_s"]), ("tpot", slo["tpot_p99_s"]), ("e2e", None)):
        v = lat[key]
        verdict = "" if tgt is None else f"{ms(tgt)} {_mark(slo['met'].get(key + '_p99'))}"
        t.add_row(f"{key}_ms", ms(v["p50"]), ms(v["p90"]), ms(v["p99"]), ms(v["mean"]), verdict)
    say(t)
    vt, target_lines = verdict_table(s.get("verdict") or [])
    if vt is not None:
        say(vt)
        for line in target_lines:
            say(line, markup=False)
    for f in s.get("diagnosis") or []:
        for line in finding_lines(f, WIDTH):
            say(line, markup=False)
    th = s["throughput"]
    lines = wrap([f"requests: {req['arrived']:,} arrived, {req['completed']:,} completed",
                  f"{req['rejected']:,} rejected, {req['unfinished']:,} unfinished",
                  f"served {_pct(slo['served'], 4)} (SLO ≥ {slo['served_fraction']:.2%})",
                  f"attainment {_pct(slo['attainment'], 2)}", f"goodput {slo['goodput_requests_per_s']:.2f} req/s"],
                 WIDTH, "")
    usd_m = cost["usd_per_million_output_tokens"]
    lines += wrap([f"throughput: {th['requests_per_s']:.2f} req/s, {th['output_tokens_per_s']:,.0f} output tok/s",
                   f"cost: ${cost['usd']:,.2f}", f"{'-' if usd_m is None else f'${usd_m:,.2f}'} per M output tokens",
                   f"{cost['device_hours']:,.2f} device-hours"], WIDTH, "")
    for name, p in s["pools"].items():
        parts = p["time_breakdown_s"]
        total = sum(parts.values()) or 1.0
        split = ", ".join(f"{k} {v / total:.0%}" for k, v in parts.items() if v / total >= 0.005)
        lines += wrap([f"pool {name}: {p['hardware']} x{p['devices_per_instance']}",
                       f"{p['model']} {p['weights_dtype']}", f"up to {p['instances_max']} instances",
                       f"${p['usd']:,.2f}", f"busy {p['busy_fraction']:.0%}", f"time: {split}"], WIDTH, "  ")
        kv = (s.get("kv_memory") or {}).get(name)
        if kv:
            lines += wrap([f"KV {kv['tokens_per_instance']:,} tokens per instance", kv["basis"]], WIDTH, "    ")
    for line in lines:
        say(line, markup=False)
    for line in provenance_lines(s.get("cost_model") or {}):
        say(line, markup=False)
    cal = s.get("calibration")
    if cal:
        held = cal.get("heldout_ttft_p50_error_pct", cal.get("held_out_ttft_p50_error_pct"))
        say(f"calibration overlay: {cal.get('name', '?')} (fitted on {cal.get('measured', cal.get('fitted_on', '?'))}"
            + (f", held-out TTFT P50 error {held:+.1f}%" if isinstance(held, (int, float)) else "") + ")",
            markup=False)
    bad = {k: v for k, v in s["invariants"].items() if v != "ok"}
    say("invariants: " + ("all ok" if not bad else f"[red]{bad}[/red]"))
    say(f"results: {run_dir}", markup=False)


def provenance_lines(cm: dict, width: int = WIDTH) -> list[str]:
    """The cost model's provenance in words, saying plainly when no number was measured on a device."""
    kind = cm.get("kind", "unknown")
    head = f"cost model: {kind}" + (f", profile {cm['profile']}" if cm.get("profile") else ", no measured profile")
    phrases = [head]
    if kind == "analytical":
        phrases.append("no number here was measured on a GPU")
    phrases.append(str(cm.get("note", "")))
    lines = wrap([p for p in phrases if p], width, "")
    for pool, text in (cm.get("sources") or {}).items():  # measured grids: who measured them
        lines += wrap([f"measured ({pool}): {text}"], width, "  ")
    return lines
