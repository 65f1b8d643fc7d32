"""The gate: a run's verdict as one line, `PASS` or `FAIL: <the SLOs it misses>`, printed first by `python -m sim`
(and, for a plan, by `python -m sim.plan`) so that a review can be automated; with `check=true` a FAIL also makes
the exit status 1.

Read from `summary.json` `verdict` records (sim/review/verdict.py): the run passes when every run-wide row
(`class: all`, `pool: all`) is `met`. A FAIL names the concrete (class, pool) rows that missed, worst first
(largest achieved/target), then those with no data (missing data is never a pass), e.g.
`FAIL: tpot_p99 completion@main 176 ms > 25 ms`. A partial (interrupted) run never passes.
"""
from __future__ import annotations

from sim.results.schema import SUMMARY

ALL = "all"
MAX_LISTED = 4          # misses named on the line; the rest are counted (every one is in summary.json `verdict`)


def latency(x: float, digits: int = 3) -> str:
    """A latency in its natural unit to `digits` significant digits: ms under 1 s, s under 10 min, else min."""
    value, unit = (x * 1e3, "ms") if x < 1 else (x, "s") if x < 600 else (x / 60, "min")
    text = f"{value:.{digits}g}"
    if "e" in text:  # (no exponent: whole units past `digits` digits)
        text = f"{value:.0f}"
    return f"{text} {unit}"


def versus(achieved: float, target: float) -> str:
    """`<achieved> > <target>`, with digits added until the two differ (50.4 ms > 50 ms, not 50 ms > 50 ms)."""
    for digits in range(3, 8):
        a, t = latency(achieved, digits), latency(target, digits)
        if a != t:
            break
    return f"{a} > {t}"


def phrase(r: dict) -> str:
    """One verdict record as `<slo> <class>@<pool> <achieved> > <target>` (`<` for the served fraction)."""
    where = f"{r['slo']} {r['class']}@{r['pool']}"
    a, t = r.get("achieved"), r.get("target")
    if r["status"] == "no_data" or a is None or a != a:
        return f"{where} no data"
    if r["slo"] == "served_fraction":
        return f"{where} {a:.2%} < {t:.2%}"
    return f"{where} {versus(a, t)}"


def _ratio(r: dict) -> float:
    """How far a missed row is from its target (> 1), as sim/review/verdict.py `badness` ranks them."""
    a, t = r.get("achieved") or 0.0, r.get("target") or 0.0
    if r["slo"] == "served_fraction":
        return t / a if a else float("inf")
    return a / t if t else float("inf")


def failures(summary: dict) -> list[str]:
    """What the run misses, worst first; empty when it passes."""
    records = summary.get("verdict")
    if records is None:  # (a summary written before verdict records: the run-wide `slo.met`)
        met = (summary.get("slo") or {}).get("met") or {}
        return [f"{k} {'no data' if v is None else 'missed'}" for k, v in met.items() if v is not True] \
            or ([] if met else [f"no SLO verdict in {SUMMARY}"])
    overall = [r for r in records if r["class"] == ALL and r["pool"] == ALL]
    if overall and all(r["status"] == "met" for r in overall):
        return []
    bad = [r for r in records if r["status"] != "met" and r["class"] != ALL]
    concrete = [r for r in bad if r["pool"] != ALL]
    # (requests rejected before placement have no pool: only the `pool: all` rows hold them)
    rows = concrete or bad or [r for r in overall if r["status"] != "met"]
    missed = sorted((r for r in rows if r["status"] == "missed"), key=lambda r: (-_ratio(r), r["slo"], r["class"]))
    return [phrase(r) for r in missed] + [phrase(r) for r in rows if r["status"] != "missed"]


def verdict_line(summary: dict) -> str:
    """`PASS`, or `FAIL: ...` naming at most MAX_LISTED misses (and how many more)."""
    misses = failures(summary)
    if summary.get("status") == "interrupted":
        misses = [f"interrupted at simulated t = {summary.get('simulated_duration_s', 0):,.1f} s (partial run)",
                  *misses]
    if not misses:
        return "PASS"
    shown = misses[:MAX_LISTED]
    more = len(misses) - len(shown)
    return "FAIL: " + "; ".join(shown) + (f"; +{more} more ({SUMMARY} verdict)" if more else "")


def passed(summary: dict) -> bool:
    return verdict_line(summary) == "PASS"
