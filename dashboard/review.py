"""The review's answers for one run: verdict tables (per class, per class x pool), the diagnosis of what missed,
and the cost model's provenance in plain words. Shared by the Run page and the HTML report; reads `summary.json`
keys only (`verdict`, `diagnosis`, `cost_model`, `pools.*.cost_model`), formatted by sim/results/text.py."""
from __future__ import annotations

import pandas as pd

from dashboard.data import is_partial
from sim.results.schema import SUMMARY
from sim.results.text import SLO_LABEL, evidence_phrases, headline, target, value

STATUS = {"met": "met", "missed": "missed", "no_data": "no data"}


def _frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([{"class": r["class"], "pool": r["pool"], "SLO": SLO_LABEL.get(r["slo"], r["slo"]),
                          "target": target(r["slo"], r["target"]), "achieved": value(r["slo"], r["achieved"]),
                          "requests": r["requests"], "verdict": STATUS.get(r["status"], r["status"])}
                         for r in rows])


def verdict_tables(summary: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per class over every pool, per class x pool with each pool's all-classes row); empty frames for a run
    written before `verdict` existed."""
    rows = summary.get("verdict") or []
    by_class = [r for r in rows if r["pool"] == "all"]
    by_pool = sorted((r for r in rows if r["pool"] != "all"), key=lambda r: (r["pool"], r["class"] == "all", r["class"]))
    return _frame(by_class), _frame(by_pool)


def partial_text(summary: dict) -> str | None:
    """The banner of a partial run: when it stopped, what was left in flight, what its figures cover; None for a
    complete run."""
    if not is_partial(summary):
        return None
    stopped_s = summary.get("simulated_duration_s")
    unfinished = (summary.get("requests") or {}).get("unfinished")
    at = f"{stopped_s:,.1f} s" if isinstance(stopped_s, (int, float)) else "an unknown time"
    left = f"{unfinished:,}" if isinstance(unfinished, int) else "an unknown number of"
    return (f"Partial run: interrupted at simulated t = {at}; {left} requests unfinished; latencies and costs cover "
            "only what was simulated.")


def findings(summary: dict) -> list[dict]:
    """The diagnosis as {headline, evidence: [phrases], try: [overrides]}; none for a partial run, whose windows
    the simulation did not finish (`diagnosis_note` says so instead)."""
    if is_partial(summary):
        return []
    return [{"headline": headline(f), "evidence": evidence_phrases(f), "try": list(f.get("try") or []),
             "cause": f["cause"]} for f in summary.get("diagnosis") or []]


def diagnosis_note(summary: dict) -> str | None:
    """What to say when there is no finding: None when there are findings."""
    if is_partial(summary):
        return ("Partial run: no cause is named and no change is suggested for a window the simulation did not "
                "finish. Run it to its end for a diagnosis.")
    if summary.get("diagnosis"):
        return None
    if "diagnosis" not in summary:
        return f"This run has no diagnosis (written before {SUMMARY} had one)."
    return "Nothing to diagnose: every SLO verdict is met or has no data."


def provenance_text(summary: dict) -> str:
    """Where the step times come from, in one sentence: measured, analytical or mixed, and which ops."""
    cm = summary.get("cost_model") or {}
    kind = cm.get("kind", "unknown")
    measured, analytical = set(), set()
    for p in (summary.get("pools") or {}).values():
        d = p.get("cost_model") or {}
        measured.update(d.get("measured_ops") or [])
        analytical.update(d.get("analytical_ops") or [])
    if kind == "analytical" or (kind != "measured" and not measured):
        ops = f" ({', '.join(sorted(analytical))})" if analytical else ""
        return ("Cost model: analytical. No number here was measured on a GPU: every step time is a roofline over "
                f"datasheet peaks with documented default efficiencies{ops}.")
    if kind == "measured":
        return (f"Cost model: measured. Step times come from kernels timed on {cm.get('hardware', 'the device')} "
                f"(profile {cm.get('profile') or '?'}: {', '.join(sorted(measured)) or 'every op'}).")
    return (f"Cost model: mixed. Measured on {cm.get('hardware', 'the device')} (profile {cm.get('profile') or '?'}): "
            f"{', '.join(sorted(measured))}; analytical (roofline, not measured): "
            f"{', '.join(sorted(analytical - measured)) or 'none'}.")


HOURS_PER_MONTH = 730.0  # 365 x 24 / 12


def provenance_across(summaries: list[dict]) -> str:
    """The cost-model provenance of several runs in one sentence: one kind for all, or the count of each kind."""
    kinds = [(s.get("cost_model") or {}).get("kind", "unknown") for s in summaries]
    if not kinds:
        return "Cost model: unknown (no run summary could be read)."
    if len(set(kinds)) == 1:
        one = provenance_text(summaries[0]) if kinds[0] == "analytical" else f"Cost model: {kinds[0]}."
        return one if len(kinds) == 1 else f"{len(kinds)} runs, all priced the same way. {one}"
    counts = ", ".join(f"{k} {kinds.count(k)}" for k in sorted(set(kinds)))
    return (f"Cost models differ across these runs ({counts}): a measured and an analytical price are not the "
            "same evidence; see each run's page.")


def monthly_text(summary: dict) -> str | None:
    """The run's bill at its simulated rate for a month (730 h). The projection assumes the window's traffic all
    month long, so a peak window overstates a month that is mostly off-peak."""
    usd = (summary.get("cost") or {}).get("usd")
    dur = summary.get("simulated_duration_s")
    if not isinstance(usd, (int, float)) or not isinstance(dur, (int, float)) or dur <= 0:
        return None
    month = usd / dur * HOURS_PER_MONTH * 3600.0
    return (f"Monthly projection: ${month:,.0f} (this run's ${usd:,.2f} over {dur:,.0f} s at the same rate for "
            "730 h; a peak window overstates a month that is mostly off-peak).")
