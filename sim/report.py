"""The compact terminal summary printed after a run (rich table; units in the row names)."""
from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table


def _ms(x) -> str:
    return "-" if x is None or x != x else f"{x * 1e3:,.1f}"


def _mark(met) -> str:
    """A verdict: ✓ met, ✗ missed, `no data` when nothing was measured (never a pass)."""
    return "no data" if met is None else ("✓" if met else "✗")


def _pct(x, digits: int) -> str:
    return "no data" if x is None else f"{x:.{digits}%}"


def print_summary(s: dict, run_dir: Path | str) -> None:
    console = Console(highlight=False)
    if s.get("status") == "interrupted":
        console.print(f"[bold]interrupted[/bold] at simulated t = {s['simulated_duration_s']:,.1f} s: "
                      "figures cover what was simulated")
    req, lat, slo, cost = s["requests"], s["latency_s"], s["slo"], s["cost"]
    t = Table(title=f"inferplan · {s['scenario']} · seed {s['seed']} · {s['simulated_duration_s']:,.0f} s simulated")
    t.add_column("metric")
    t.add_column("p50", justify="right")
    t.add_column("p90", justify="right")
    t.add_column("p99", justify="right")
    t.add_column("mean", justify="right")
    t.add_column("SLO (p99)", justify="right")
    for key, target in (("ttft", slo["ttft_p99_s"]), ("tpot", slo["tpot_p99_s"]), ("e2e", None)):
        v = lat[key]
        verdict = "" if target is None else f"{_ms(target)} {_mark(slo['met'].get(key + '_p99'))}"
        t.add_row(f"{key}_ms", _ms(v["p50"]), _ms(v["p90"]), _ms(v["p99"]), _ms(v["mean"]), verdict)
    console.print(t)
    classes = slo.get("classes") or {}
    if len(classes) > 1:
        for name, c in classes.items():
            failed = [k for k, v in c["met"].items() if v is False]
            empty = [k for k, v in c["met"].items() if v is None]
            console.print(f"  {name}: {c['requests']:,} requests · TTFT p99 {_ms(c['ttft_s']['p99'])} ms "
                          f"(≤ {_ms(c['ttft_p99_s_target'])}) · TPOT p99 {_ms(c['tpot_s']['p99'])} ms "
                          f"(≤ {_ms(c['tpot_p99_s_target'])}) · served {c['served']:.3%} · "
                          + ("✗ " + ", ".join(failed) if failed else "✓" if not empty else "")
                          + (f" no data: {', '.join(empty)}" if empty else ""))
    th = s["throughput"]
    console.print(
        f"requests: {req['arrived']:,} arrived, {req['completed']:,} completed, {req['rejected']:,} rejected, "
        f"{req['unfinished']:,} unfinished · served {_pct(slo['served'], 4)} (SLO ≥ {slo['served_fraction']:.2%}) · "
        f"attainment {_pct(slo['attainment'], 2)} · goodput {slo['goodput_requests_per_s']:.2f} req/s")
    usd_m = cost["usd_per_million_output_tokens"]
    console.print(
        f"throughput: {th['requests_per_s']:.2f} req/s, {th['output_tokens_per_s']:,.0f} output tok/s · cost: "
        f"${cost['usd']:,.2f}, {'-' if usd_m is None else f'${usd_m:,.2f}'} per M output tokens, "
        f"{cost['device_hours']:,.2f} device-hours")
    for name, p in s["pools"].items():
        parts = p["time_breakdown_s"]
        total = sum(parts.values()) or 1.0
        split = ", ".join(f"{k} {v / total:.0%}" for k, v in parts.items() if v / total >= 0.005)
        console.print(f"  pool {name}: {p['hardware']} x{p['devices_per_instance']} · {p['model']} "
                      f"{p['weights_dtype']} · up to {p['instances_max']} instances · ${p['usd']:,.2f} · "
                      f"busy {p['busy_fraction']:.0%} · time: {split}")
    cm = s["cost_model"]
    console.print(f"cost model: {cm['kind']} ({cm['note']}); profile: {cm['profile'] or 'none'}")
    cal = s.get("calibration")
    if cal:
        held = cal.get("heldout_ttft_p50_error_pct", cal.get("held_out_ttft_p50_error_pct"))
        console.print(f"calibration overlay: {cal.get('name', '?')} (fitted on {cal.get('measured', cal.get('fitted_on', '?'))}"
                      + (f", held-out TTFT P50 error {held:+.1f}%" if isinstance(held, (int, float)) else "") + ")")
    bad = {k: v for k, v in s["invariants"].items() if v != "ok"}
    console.print("invariants: " + ("all ok" if not bad else f"[red]{bad}[/red]"))
    console.print(f"results: {run_dir}")
