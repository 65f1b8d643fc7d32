"""A run's SLO checks, read from its `summary.json`: per request class, TTFT P99, TPOT P99 and the served fraction,
each with its target, what was achieved and the margin.

The verdicts are the simulator's own (`slo.classes.<class>.met`, `slo.met`); a configuration meets the SLOs when
every one is true. **Margin** is the slack before the check would fail, positive when met: `target - achieved` for
latencies (s), `achieved - target` for the served fraction; `margin_pct` is the margin over the target, in percent.

At a confidence (sim/plan/confidence.py) a latency check also carries its error band: `achieved_at_confidence` =
achieved x the band's factor (>= 1), met at confidence when the simulator's verdict is met and that figure is
within the target. The served fraction has no band (the matrix measures latencies only).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace


@dataclass(frozen=True)
class SloCheck:
    name: str                 # ttft_p99 | tpot_p99 | served_fraction
    request_class: str        # the class, or "*" for the fleet-wide served fraction
    target: float
    achieved: float | None    # None when nothing was measured (no request completed)
    unit: str                 # "s" or "fraction"
    met: bool
    band: dict | None = None  # the error band at the plan's confidence (confidence.Band.to_json()); None: none

    @property
    def achieved_at_confidence(self) -> float | None:
        if self.achieved is None or self.band is None:
            return self.achieved
        return self.achieved * float(self.band["factor"])

    @property
    def met_at_confidence(self) -> bool:
        a = self.achieved_at_confidence
        return self.met and (self.band is None or (a is not None and a <= self.target))

    @property
    def margin(self) -> float | None:
        if self.achieved is None:
            return None
        return self.achieved - self.target if self.unit == "fraction" else self.target - self.achieved

    @property
    def margin_pct(self) -> float | None:
        m = self.margin
        return None if m is None or not self.target else 100.0 * m / self.target

    def to_json(self) -> dict:
        d = asdict(self)
        d["class"] = d.pop("request_class")
        a = self.achieved_at_confidence
        at = None if a is None or not self.target else 100.0 * (self.target - a) / self.target
        return {**d, "margin": self.margin, "margin_pct": self.margin_pct, "achieved_at_confidence": a,
                "margin_at_confidence_pct": at if self.band is not None else self.margin_pct,
                "met_at_confidence": self.met_at_confidence}

    def describe(self) -> str:
        """e.g. `default ttft_p99 4.9 s vs target 1 s (-3.9 s, -390%)`."""
        where = "fleet" if self.request_class == "*" else self.request_class
        if self.achieved is None:
            return f"{where} {self.name}: nothing measured (target {_fmt(self.target, self.unit)})"
        return (f"{where} {self.name} {_fmt(self.achieved, self.unit)} vs target {_fmt(self.target, self.unit)} "
                f"({_signed(self.margin, self.unit)}, {self.margin_pct:+.1f}%)")


def _fmt(x: float, unit: str) -> str:
    return f"{x:.4%}" if unit == "fraction" else f"{x:.4g} s"


def _signed(x: float, unit: str) -> str:
    return f"{x * 100:+.4f} pp" if unit == "fraction" else f"{x:+.4g} s"


def _num(x) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def slo_checks(summary: dict, config: dict | None = None, bands=None) -> list[SloCheck]:
    """Every SLO check of a run: per class TTFT P99, TPOT P99, served fraction; then the fleet's served fraction.
    With `bands` (confidence.Bands) and the run's resolved `config`, each latency check carries its band."""
    checks = _checks(summary)
    if bands is None or not config:
        return checks
    out = []
    for c in checks:
        band = bands.for_check(config, c.request_class, c.name)
        out.append(c if band is None else replace(c, band=band.to_json()))
    return out


def _checks(summary: dict) -> list[SloCheck]:
    slo = summary.get("slo") or {}
    served_target = float(slo.get("served_fraction", 1.0))
    checks = []
    for cls, c in sorted((slo.get("classes") or {}).items()):
        met = c.get("met") or {}
        checks += [
            SloCheck("ttft_p99", cls, float(c["ttft_p99_s_target"]), _num((c.get("ttft_s") or {}).get("p99")), "s",
                     bool(met.get("ttft_p99", False))),
            SloCheck("tpot_p99", cls, float(c["tpot_p99_s_target"]), _num((c.get("tpot_s") or {}).get("p99")), "s",
                     bool(met.get("tpot_p99", False))),
            SloCheck("served_fraction", cls, served_target, _num(c.get("served")), "fraction",
                     bool(met.get("served_fraction", False))),
        ]
    met = slo.get("met") or {}
    checks.append(SloCheck("served_fraction", "*", served_target, _num(slo.get("served")), "fraction",
                           bool(met.get("served_fraction", False))))
    if not slo.get("classes"):   # a summary without per-class figures: the fleet-wide latencies
        lat = summary.get("latency_s") or {}
        for name, key in (("ttft_p99", "ttft"), ("tpot_p99", "tpot")):
            checks.append(SloCheck(name, "*", float(slo.get(f"{name}_s", math.inf)),
                                   _num((lat.get(key) or {}).get("p99")), "s", bool(met.get(name, False))))
    return checks


def meets_slos(summary: dict | None) -> bool:
    """Every verdict in `slo.met` and in each `slo.classes.<class>.met` is true."""
    if not summary:
        return False
    slo = summary.get("slo") or {}
    verdicts = list((slo.get("met") or {}).values())
    for c in (slo.get("classes") or {}).values():
        verdicts += list((c.get("met") or {}).values())
    return bool(verdicts) and all(bool(v) for v in verdicts)


def meets_at_confidence(summary: dict | None, config: dict | None, bands) -> bool:
    """`meets_slos`, and every latency check within its target after its band (the point estimate without bands)."""
    if not meets_slos(summary):
        return False
    return bands is None or all(c.met_at_confidence for c in slo_checks(summary, config, bands))
