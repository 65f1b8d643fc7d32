"""The terminal report of a validation run: errors by metric, throughput, what was assumed, and the fit."""
from __future__ import annotations

import math
from pathlib import Path

from rich.console import Console
from rich.table import Table

from sim.validate.compare import METRICS, STATS

LABELS = {"ttft_s": "ttft_ms", "tpot_s": "tpot_ms", "e2e_s": "e2e_ms", "itl_s": "itl_ms"}
DEPLOYMENT_KEYS = ("model", "hardware", "tp", "instances", "batching", "max_num_seqs", "token_budget", "max_model_len")


def _f(x, scale: float = 1.0, fmt: str = ",.1f") -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x * scale, fmt)


def _pct(x) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:+.1f}%"


def error_table(block: dict, title: str) -> Table:
    t = Table(title=title)
    t.add_column("metric")
    for s in STATS:
        t.add_column(f"{s} measured / sim", justify="right")
        t.add_column("err", justify="right")
    for m in (*METRICS, "itl_s"):
        if m not in block["metrics"]:
            continue  # (ITL: only where the log has per-token times)
        row = [LABELS[m]]
        for s in STATS:
            v = block["metrics"][m][s]
            row += [f"{_f(v['measured'], 1e3)} / {_f(v['simulated'], 1e3)}", _pct(v["error_pct"])]
        t.add_row(*row)
    return t


def print_by_load(c: Console, buckets: list[dict]) -> None:
    """Median signed error per bucket of measured in-flight requests at send (the load the server saw)."""
    parts = []
    for row in buckets:
        if not row["requests"]:
            continue
        parts.append(f"[{row['lo']:g}, {row['hi']:.4g}) in flight, {row['requests']} req: ttft {_pct(row['ttft_s_median_error_pct'])}, "
                     f"tpot {_pct(row['tpot_s_median_error_pct'])}")
    c.print("median error by load: " + "; ".join(parts))


def print_report(doc: dict, out: Path, console: Console | None = None) -> None:
    c = console or Console(highlight=False, width=160)
    m = doc["measured"]
    c.print(f"measured: {m['path']} ({m['format']} {m['version']}): {m['requests_used']} of {m['requests_in_log']} "
            f"requests used; skipped {m['skipped'] or 'none'}; send times: {m['arrival_source']}")
    for note in m["notes"]:
        c.print(f"  note: {note}")
    settings = doc["deployment"]["settings"]
    shown = [k for k in DEPLOYMENT_KEYS if k in settings]
    c.print("deployment: " + ", ".join(f"{k}={settings[k]['value']}" for k in shown))
    for k in shown:
        if str(settings[k]["source"]).startswith("assumed"):
            c.print(f"  {k}={settings[k]['value']}: {settings[k]['source']}")
    if doc.get("overlay_in_effect"):
        c.print(f"overlay in effect: {doc['overlay_in_effect']}")
    if not doc["per_request_comparable"]:
        c.print("[yellow]send times were reconstructed: compare percentiles, not individual requests[/yellow]")
    b = doc["baseline"]
    c.print(error_table(b, f"all {b['compared']} requests, simulated with the configured parameters"))
    th = b["throughput"]
    c.print(f"throughput: {_f(th['requests_per_s']['measured'], fmt='.3f')} measured / "
            f"{_f(th['requests_per_s']['simulated'], fmt='.3f')} simulated req/s ({_pct(th['requests_per_s']['error_pct'])}); "
            f"{_f(th['output_tokens_per_s']['measured'])} / {_f(th['output_tokens_per_s']['simulated'])} output tok/s "
            f"({_pct(th['output_tokens_per_s']['error_pct'])})")
    pr = b["per_request_error_pct"]
    c.print("per-request error, median |%|: " + ", ".join(f"{LABELS[k]} {_f(pr[k]['median_abs'])}" for k in METRICS))
    print_by_load(c, b["by_load"]["measured_inflight"])
    f = doc.get("fit")
    if f:
        p = f["params"]
        c.print(f"fit ({f['simulations']} simulations, loss {f['loss_initial']:.4g} -> {f['loss_final']:.4g}, "
                f"{f['split']['train_requests']} training / {f['split']['heldout_requests']} held-out requests): "
                f"step_overhead_s={p['step_overhead_s']:.5f}, frontend_overhead_s={p['frontend_overhead_s']:.5f}, "
                + ", ".join(f"efficiency_scale.{k}={v:.3f}" for k, v in p["efficiency_scale"].items()))
        if f["weakly_identified"]:
            c.print(f"  weakly identified by this log (kept near its start): {', '.join(f['weakly_identified'])}")
        c.print(error_table(f["heldout_before_fit"], "held-out requests, before the fit"))
        c.print(error_table(f["heldout"], "held-out requests, with the fitted overlay (the reported error)"))
        c.print(f"overlay: {f['overlay']['yaml']}\n  apply: {f['overlay']['apply']}\n  or: python -m sim "
                f"scenario=<scenario> $(cat {f['overlay']['args']})")
    c.print(f"results: {out} (validation.json, validation_requests.parquet, validation.html)")
