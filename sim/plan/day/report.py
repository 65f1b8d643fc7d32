"""The day's figures from its windows, `day_plan.json`, and the comparison with the published day (signed
errors of the prediction; nothing is fitted to the published figures)."""
from __future__ import annotations

import json
import math
from pathlib import Path

from sim.plan.day.capacity import UnitCapacity
from sim.plan.day.published import PUBLISHED_DAY, SOURCE
from sim.plan.day.traffic import RequestStats


def _clean(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_clean(v) for v in x]
    return x


def day_figures(windows: list[dict], stats: RequestStats, cap: UnitCapacity) -> dict:
    """Per window nodes = prefill units x nodes per unit + decode units x nodes per unit (the verified counts where
    simulated, else the arithmetic ones); the day's figures weight windows by their length."""
    total_s = sum(w["length_s"] for w in windows)
    for w in windows:
        w["prefill_nodes"] = w["prefill_units"] * cap.prefill_nodes_per_unit
        w["decode_nodes"] = w["decode_units"] * cap.decode_nodes_per_unit
        w["nodes"] = w["prefill_nodes"] + w["decode_nodes"]
    node_s = sum(w["nodes"] * w["length_s"] for w in windows)
    prefill_node_s = sum(w["prefill_nodes"] * w["length_s"] for w in windows)
    decode_node_s = sum(w["decode_nodes"] * w["length_s"] for w in windows)
    requests = sum(w["requests"] for w in windows)
    peak = max(w["nodes"] for w in windows)
    node_hours = node_s / 3600.0
    verified = [w for w in windows if w["rounds"]]
    return {
        "windows": len(windows), "windows_simulated": len(verified),
        "windows_verified": sum(1 for w in verified if w["verified"]),
        "requests": requests,
        "average_nodes": node_s / total_s, "peak_nodes": peak, "node_hours": node_hours,
        "usd_per_day": node_hours * cap.usd_per_node_hour * 86400.0 / total_s,
        # per node while serving that phase, over the day (tokens over node-seconds)
        "prefill_input_tokens_per_s_per_node": requests * stats.prompt_tokens / prefill_node_s,
        "decode_output_tokens_per_s_per_node": requests * stats.output_tokens / decode_node_s,
        # the nodes a fleet kept at the day's peak would leave idle below it (lent to other work)
        "node_hours_freed": peak * total_s / 3600.0 - node_hours,
        "cache_hit_share_measured": _weighted(verified, "cache_hit_share"),
    }


def _weighted(windows: list[dict], key: str):
    pairs = [(w["measured"][key], w["measured"]["requests"]) for w in windows if w.get("measured")]
    n = sum(r for _, r in pairs)
    return sum(v * r for v, r in pairs) / n if n else None


def comparison(day: dict) -> list[dict]:
    """Predicted vs published, error signed as (predicted - published) / published."""
    return [{"figure": k, "predicted": day[k], "published": v, "error": (day[k] - v) / v}
            for k, v in PUBLISHED_DAY.items()]


def write_plan(doc: dict, out: Path) -> Path:
    doc["comparison"] = {"source": SOURCE, "figures": comparison(doc["day"])}
    path = Path(out) / "day_plan.json"
    path.write_text(json.dumps(_clean(doc), indent=1, sort_keys=False) + "\n")
    return path


def print_day(doc: dict, path: Path, echo=print) -> None:
    day, cap = doc["day"], doc["unit_capacity"]
    tr = doc["traffic"]
    echo(f"day plan · {doc['scenario']} · {day['windows']} windows of {doc['options']['window_s']:g} s · "
         f"{day['windows_simulated']} simulated, {day['windows_verified']} meet the SLOs")
    echo(f"traffic: {tr['requests_per_day'] / 1e6:,.1f} M requests a day ({tr['conversations_per_s_day_mean']:,.0f} "
         f"conversations/s x {tr['requests_per_conversation']:.3f} turns); {tr['prompt_tokens']:,.0f} input tokens "
         f"({tr['cache_hit_share']:.1%} cache hits), {tr['output_tokens']:,.0f} output tokens per request")
    echo(f"per unit (cost model): prefill {cap['prefill_new_tokens_per_s']:,.0f} new tokens/s "
         f"({cap['prefill_input_tokens_per_s']:,.0f} with hits) at {cap['prefill_token_budget']:,} tokens a step; "
         f"decode {cap['decode_output_tokens_per_s']:,.0f} output tokens/s at {cap['decode_batch_seqs']:,} sequences "
         f"(TPOT {cap['decode_tpot_s'] * 1e3:.1f} ms, limit {cap['decode_batch_limit']})")
    for w in doc["windows"]:
        if w["rounds"]:
            m = w.get("measured") or {}
            echo(f"  window {w['index']:3d} {w['start_s'] / 3600:5.2f} h: {w['requests_per_s']:,.0f} req/s, "
                 f"arithmetic {w['arithmetic']['prefill_units']}P+{w['arithmetic']['decode_units']}D -> "
                 f"{w['prefill_units']}P+{w['decode_units']}D ({'met' if w['verified'] else 'NOT met'}; "
                 f"TTFT p99 {_ms(m.get('ttft_p99_s'))}, TPOT p99 {_ms(m.get('tpot_p99_s'))}, "
                 f"hits {m.get('cache_hit_share', 0):.1%} vs {tr['cache_hit_share']:.1%}, {len(w['rounds'])} run(s))")
    if day.get("cache_hit_share_measured") is not None:
        echo(f"cache hits once warm, simulated windows: {day['cache_hit_share_measured']:.1%} of prompt tokens "
             f"(the workload's {tr['cache_hit_share']:.1%}: an input, compared; {tr['cache_hit_share_after_warmup']:.1%} "
             f"expected after the {doc['options']['warmup_s']:g} s warm-up)")
    echo(f"{'figure':38s} {'predicted':>12s} {'published':>12s} {'error':>8s}")
    for row in doc["comparison"]["figures"]:
        echo(f"{row['figure']:38s} {row['predicted']:12,.1f} {row['published']:12,.1f} {row['error']:+8.1%}")
    echo(f"node-hours freed below the peak: {day['node_hours_freed']:,.0f} · wall {doc['wall_s']:.0f} s · {path}")


def _ms(x) -> str:
    return "-" if x is None else f"{x * 1e3:,.0f} ms"
