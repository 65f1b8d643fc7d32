"""One window of the day simulated at full rate on a given fleet: the simulated span starts `warmup_s` before the
measured span, so queues, decode batches and the prefix cache (conversations begun earlier re-read their context)
are warm when measuring starts; the SLO figures count only requests that arrive in the measured span.

A window's run is an ordinary simulator run (the scenario with `session_arrivals.window_start_s/window_s` and the
pools' `instances` overridden), so it goes through the planner's executors (local processes or Ray).

Memory grows with the requests a run holds (~5.8 KB each, measured), so a window whose run would hold more than
`max_requests` is simulated as a slice of its fleet: `s` of its D decode units (f = s / D) with ceil(f P) of its
P prefill units, under f of the traffic (the day's level times f: conversations are independent, so a thinner
Poisson stream of them is the share one slice of a fleet behind a balancing router sees). A slice's units stand
for 1/f units of the fleet each.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from sim.results.read import read_table

COLUMNS = ["arrival_s", "status", "ttft_s", "tpot_s", "prompt_tokens", "cached_tokens", "output_tokens"]


@dataclass(frozen=True)
class Span:
    """Where window `index` is simulated: day seconds [sim_start_s, sim_start_s + sim_s), measured from
    `measure_from_s` (run seconds, i.e. after the warm-up) for `measure_s`."""

    index: int
    start_s: float            # the window's start in the day
    sim_start_s: float
    sim_s: float
    measure_from_s: float
    measure_s: float


def span(index: int, window_s: float, warmup_s: float, measure_s: float) -> Span:
    """The run of window `index`: warm-up before the window's start (from the day's start for the first windows,
    whose measured span then begins `warmup_s` into the day)."""
    start = index * window_s
    sim_start = max(0.0, start - warmup_s)
    measure_from = max(start, sim_start + warmup_s) - sim_start
    return Span(index, start, sim_start, measure_from + measure_s, measure_from, measure_s)


@dataclass(frozen=True)
class Slice:
    fraction: float           # of the fleet and of the traffic
    prefill_units: int
    decode_units: int

    def fleet_units(self) -> tuple[int, int]:
        """The fleet's unit counts this slice stands for."""
        return (math.ceil(self.prefill_units / self.fraction - 1e-9),
                math.ceil(self.decode_units / self.fraction - 1e-9))


def fleet_slice(prefill_units: int, decode_units: int, expected_requests: float, max_requests: float) -> Slice:
    """The whole fleet when its run holds at most `max_requests`, else the largest slice of whole decode units
    that does (at least one)."""
    if expected_requests <= max_requests:
        return Slice(1.0, prefill_units, decode_units)
    s = max(1, math.floor(decode_units * max_requests / expected_requests))
    f = s / decode_units
    return Slice(f, max(1, math.ceil(f * prefill_units - 1e-9)), s)


def window_overrides(sp: Span, prefill_pool: str, decode_pool: str, sl: Slice, day_rate_per_s: float,
                     drain_s: float) -> tuple[str, ...]:
    sa = "scenario.traffic.session_arrivals"
    prefill_units, decode_units = sl.prefill_units, sl.decode_units
    rate = () if sl.fraction == 1.0 else (f"{sa}.mean_rate_per_s={day_rate_per_s * sl.fraction!r}",)
    return (*rate, f"{sa}.window_start_s={sp.sim_start_s:g}", f"{sa}.window_s={sp.sim_s:g}",
            f"scenario.pools.{prefill_pool}.instances={prefill_units}",
            f"scenario.pools.{decode_pool}.instances={decode_units}",
            f"scenario.drain_timeout_s={drain_s:g}", "metrics.progress=false")


@dataclass(frozen=True)
class WindowMeasure:
    """SLO figures over the requests arriving in the measured span."""

    requests: int
    completed: int
    rejected: int
    unfinished: int           # still running when the drain ended (their TPOT is not known)
    ttft_p99_s: float | None
    tpot_p99_s: float | None
    served: float             # completed / (completed + rejected)
    cache_hit_share: float    # cached prompt tokens / prompt tokens
    met: dict

    def to_json(self) -> dict:
        return asdict(self)


def _p99(x: np.ndarray) -> float | None:
    x = x[np.isfinite(x)]
    return float(np.percentile(x, 99)) if x.size else None


def measure(run_dir: Path, sp: Span, slo: dict) -> WindowMeasure:
    """Read `requests.parquet` of a window's run and compute its SLO figures against `slo` (`ttft_p99_s`,
    `tpot_p99_s`, `served_fraction`)."""
    t = read_table(Path(run_dir), "requests", COLUMNS).to_pydict()
    arrival = np.asarray(t["arrival_s"], dtype=np.float64)
    mine = (arrival >= sp.measure_from_s) & (arrival < sp.measure_from_s + sp.measure_s)
    status = np.asarray(t["status"], dtype=object)[mine]
    done, rejected = status == "completed", status == "rejected"
    ttft = np.asarray(t["ttft_s"], dtype=np.float64)[mine]
    tpot = np.asarray(t["tpot_s"], dtype=np.float64)[mine]
    out = np.asarray(t["output_tokens"], dtype=np.int64)[mine]
    prompt = np.asarray(t["prompt_tokens"], dtype=np.float64)[mine]
    cached = np.asarray(t["cached_tokens"], dtype=np.float64)[mine]
    n_done, n_rej = int(done.sum()), int(rejected.sum())
    ttft_p99 = _p99(ttft[~rejected])
    tpot_p99 = _p99(tpot[done & (out > 1)])
    served = n_done / (n_done + n_rej) if n_done + n_rej else 0.0
    met = {"ttft_p99": ttft_p99 is not None and ttft_p99 <= slo["ttft_p99_s"],
           "tpot_p99": tpot_p99 is not None and tpot_p99 <= slo["tpot_p99_s"],
           "served_fraction": served >= slo["served_fraction"]}
    return WindowMeasure(int(mine.sum()), n_done, n_rej, int(mine.sum()) - n_done - n_rej, ttft_p99, tpot_p99,
                         served, float(cached.sum() / prompt.sum()) if prompt.sum() else 0.0, met)


def next_slice(sl: Slice, m: WindowMeasure) -> Slice:
    """One more unit in the slice where a target was missed: TTFT -> prefill (the prompt queue), TPOT -> decode
    (the batch); a served-fraction miss alone (KV or queue rejections) -> both."""
    p = sl.prefill_units + (not m.met["ttft_p99"])
    d = sl.decode_units + (not m.met["tpot_p99"])
    if (p, d) == (sl.prefill_units, sl.decode_units):
        p, d = p + 1, d + 1
    return Slice(sl.fraction, p, d)
