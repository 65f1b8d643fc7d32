"""Verdicts and findings in words: the phrases the terminal, the dashboard and the HTML report print.

Pure formatting of `summary.json` `verdict` / `diagnosis` records (no simulator imports), and a wrapper that
breaks lines only between phrases so nothing wraps mid-phrase in an 80-column terminal.
"""
from __future__ import annotations

import textwrap

SLO_LABEL = {"ttft_p99": "TTFT P99", "tpot_p99": "TPOT P99", "served_fraction": "served fraction"}
CAUSE_LABEL = {"queueing": "queueing", "step_time": "slow steps (large batches)", "kv_preemption": "KV preemptions",
               "autoscaler_lag": "autoscaler lag", "cold_start": "cold starts", "overload_action": "overload ladder",
               "placement_spill": "placement spill",
               "prefill_interference": "prefill interference (decodes stalled behind long prefills)",
               "undiagnosed": "none the evidence supports"}


def value(slo: str, x) -> str:
    """An SLO value in its natural unit: ms under 10 s, s under 10 min, else min; the served fraction in %."""
    if x is None or x != x:
        return "no data"
    if slo == "served_fraction":
        return f"{x:.3%}"
    if x < 10:
        return f"{x * 1e3:,.1f} ms"
    return f"{x:,.0f} s" if x < 600 else f"{x / 60:,.0f} min"


def target(slo: str, x) -> str:
    if x is None:
        return "-"
    if slo == "served_fraction":
        return f"≥ {x:.2%}"
    if x < 1:
        return f"≤ {x * 1e3:g} ms"
    return f"≤ {x:g} s" if x < 600 else f"≤ {x / 60:g} min"


def mark(status: str) -> str:
    return {"met": "✓", "missed": "✗"}.get(status, "no data")


def headline(f: dict) -> str:
    if f.get("partial"):
        return (f"partial run: stopped at simulated t = {f['window_s'][1]:,.1f} s "
                "· no cause is named for windows the run did not finish")
    a, b = f["window_s"]
    return (f"{SLO_LABEL.get(f['slo'], f['slo'])} missed: {f['class']} on {f['pool']}, {a:,.0f}-{b:,.0f} s "
            f"· cause: {CAUSE_LABEL.get(f['cause'], f['cause'])}")


def _n(x, fmt: str = "{:,}") -> str:
    return "?" if x is None else fmt.format(x)


def evidence_phrases(f: dict) -> list[str]:
    """The finding's evidence as short phrases, the cause's own facts first."""
    e, slo, cause = f["evidence"], f["slo"], f["cause"]
    if f.get("partial"):
        missed = e.get("missed_verdicts") or []
        return [f"missed over what was simulated: {', '.join(missed)}" if missed else "nothing missed",
                f"{e.get('requests_unfinished', 0):,} requests unfinished", "run it to its end for a diagnosis"]
    out = []
    if cause in ("autoscaler_lag", "cold_start"):
        out.append(f"{e.get('autoscaler', '?')} autoscaler: {_n(e.get('instances_max_before'))} instances before, "
                   f"{_n(e.get('instances_at_window_start'))} at the window's start, "
                   f"{_n(e.get('instances_at_window_end'))} at its end (max {_n(e.get('max_instances'))})")
        out.append(f"pool load {_n(e.get('pool_arrivals_per_s_before'), '{:,.1f}')} -> "
                   f"{_n(e.get('pool_arrivals_per_s_in_window'), '{:,.1f}')} req/s")
        out.append(f"{e.get('scale_downs_before_and_in_window', 0)} scale-downs before, "
                   f"{e.get('scale_ups_in_window', 0)} scale-ups in the window")
        if e.get("cold_starts_before_and_in_window"):
            out.append(f"{e['cold_starts_before_and_in_window']} cold starts"
                       + (f" (median {e['cold_start_s_median']:,.0f} s)" if e.get("cold_start_s_median") else "")
                       + f", {e.get('starting_at_window_start', 0)} starting at the window's start")
    elif cause == "placement_spill":
        out.append(f"{_n(e.get('spilled_in_window'))} requests spilled here from {e.get('first_route')}")
    elif cause == "kv_preemption":
        out.append(f"{e.get('preempted_share_of_slow', 0):.0%} of the slow requests preempted, "
                   f"{e.get('preemptions_in_window', 0):,} preemptions")
        if e.get("kv_utilization_max") is not None:
            out.append(f"KV use up to {e['kv_utilization_max']:.0%}")
    elif cause == "overload_action":
        out.append(f"{e.get('fallback_share_of_slow', 0):.0%} of the slow requests on the fallback pool")
        if e.get("rejected_in_window"):
            out.append("rejected: " + ", ".join(f"{k} {v:,}" for k, v in e["rejected_in_window"].items()))
    elif cause == "prefill_interference":
        if e.get("slow_beside_prefill_share") is not None:
            out.append(f"{e['slow_beside_prefill_share']:.0%} of slow decodes waited on other prefills "
                       f"(median {_n(e.get('prefill_tokens_beside_slow_p50'), '{:,.0f}')} prompt tokens)")
        out.append(f"TPOT P50 {value(slo, e.get('tpot_p50_s_beside_prefill'))} beside prefills, "
                   f"{value(slo, e.get('tpot_p50_s_without_prefill'))} without")
        if e.get("prefill_prompt_tokens_max_in_window") is not None:
            out.append(f"prompts up to {e['prefill_prompt_tokens_max_in_window']:,} tokens")
    elif cause == "queueing" and e.get("queueing_share_of_ttft") is not None:
        out.append(f"queueing ~{e['queueing_share_of_ttft']:.0%} of mean TTFT "
                   f"({e.get('queued_per_instance', 0):,.1f} queued per instance)")
    if cause in ("step_time", "prefill_interference", "undiagnosed", "autoscaler_lag", "cold_start", "queueing") \
            and e.get("running_per_instance") is not None:
        r = e["running_per_instance"]
        out.append(f"{r:,.{1 if r < 10 else 0}f} running per instance, busy {e.get('busy_fraction_mean') or 0:.0%}")
    if e.get("overload_transitions_in_window"):
        k = len(e["overload_transitions_in_window"])
        out.append(f"{k} overload-ladder change{'s' if k > 1 else ''}")
    out.append(f"{e.get('requests_over_target', 0):,} of {e.get('requests_in_window', 0):,} requests over target")
    out.append(f"window P99 {value(slo, e.get('achieved_in_window'))} vs {target(slo, e.get('target'))}"
               if slo != "served_fraction" else f"window served {value(slo, e.get('achieved_in_window'))}")
    return out


def wrap(phrases: list[str], width: int = 80, indent: str = "  ", sep: str = " · ") -> list[str]:
    """Join phrases with `sep`, breaking lines only between phrases (a phrase longer than a line gets its own)."""
    lines, cur = [], ""
    for p in phrases:
        if len(indent) + len(p) > width:  # a phrase longer than a line: its own lines, broken between words
            if cur:
                lines.append(indent + cur)
            parts = textwrap.wrap(p, width - len(indent) - 2)
            lines += [indent + x if i == 0 else indent + "  " + x for i, x in enumerate(parts)]
            cur = ""
            continue
        cand = p if not cur else cur + sep + p
        if cur and len(indent) + len(cand) > width:
            lines.append(indent + cur)
            cur = p
        else:
            cur = cand
    if cur:
        lines.append(indent + cur)
    return lines


def finding_lines(f: dict, width: int = 80) -> list[str]:
    """One finding as terminal lines: the headline, the evidence, the knobs to try (one per line)."""
    out = wrap(headline(f).split(" · "), width, "")
    out += wrap(evidence_phrases(f), width, "  ")
    out += ["  try: " + t if i == 0 else "       " + t for i, t in enumerate(f.get("try") or [])]
    return out
