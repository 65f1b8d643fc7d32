"""N+1 headroom: with `redundancy=n+1` (the planner option, for every pool) or a pool's own `redundancy: n+1`, a
configuration passes only if it also meets every SLO with one instance of each such pool failed at the worst time.

How. Each configuration is simulated a second time with, for each n+1 pool, the override
`++scenario.pools.<pool>.failures=[{at_s: peak, instances: 1, repair_s: cold_start}]`: one instance (the busiest)
fails at the start of the workload's busiest twentieth (10% into a flat workload; `peak_s` in
sim/core/fleet/failures.py), its requests fail over to the pool's other instances (or are rejected when there is
none), and its replacement is asked for one cold start after the failure and then cold-starts itself, so the pool
is one instance short for two cold starts. Every n+1 pool loses its instance at the same moment: one extra run per
configuration, the stricter reading of "one instance of each pool failed". The override replaces a `failures:`
the pool already has (spot interruptions, `spot_interruption_mtbf_s`, stay). The cost ranked is the first run's;
the second run's figures are shown beside it (plan.json `n_plus_1`).
"""
from __future__ import annotations

from sim.plan.evaluate import Outcome
from sim.plan.slo import meets_at_confidence

N_PLUS_1 = "n+1"
FAILURE = "[{at_s:peak,instances:1,repair_s:cold_start}]"


def failure_overrides(run, option: str) -> tuple[str, ...]:
    """The overrides of every configuration's failure run: one per pool whose redundancy (its own, else the
    planner's `option`) is n+1; () when no pool asks for it."""
    pools = [name for name, p in run.pools.items() if (p.redundancy or option) == N_PLUS_1]
    return tuple(f"++scenario.pools.{name}.failures={FAILURE}" for name in pools)


def redundant_pools(companion: tuple[str, ...]) -> list[str]:
    """The pools named by `failure_overrides` (for the plan's notes)."""
    return [arg.split(".")[2] for arg in companion]


def run_meets(out: Outcome | None, bands=None) -> bool:
    """One run completed and met every SLO (at the confidence of `bands`, confidence.Bands; None: point estimate)."""
    return out is not None and out.status == "completed" and meets_at_confidence(out.summary, out.config, bands)


def passes(out: Outcome, bands=None) -> bool:
    """The configuration meets every SLO: as it is, and with its N+1 failure when one is simulated."""
    return run_meets(out, bands) and (out.failure_run is None or run_meets(out.failure_run, bands))
