"""Instance failures: a pool loses serving instances at given times, at random (faults with an exponential time to
failure of mean `mtbf_s`) or as spot interruptions, and replaces each one.

The model. A failure stops an instance at once (`Instance.fail`): the iteration in flight is lost with the KV it
held, and its billing ends. Its requests are not dropped: the cluster (`Cluster._on_failure`) re-routes each to
the pool's other instances as a fresh arrival of its remaining work (its prompt and the tokens it already emitted
are recomputed, the KV being gone, as after a preemption by recomputation), or rejects it (`instance_failure`)
when the pool has no active instance left to take it. A failed serving instance is replaced: `repair_s` after the
failure (detection and repair, or procurement of a new node) the pool asks for a new instance, which goes through
the pool's cold start (`ColdStart`, inferplan/config/fleet.py; a warm spare switches in instead when one is kept). A spot interruption is
replaced at once (repair 0: a new spot node is requested immediately, and cold-starts). A draining instance that
fails is not replaced: it was leaving.

Which instance: a given-time failure takes the active instances holding the most requests (ties: the lowest
index), the worst case for the requests and deterministic. Drawn failures are per instance: when an instance
starts serving it draws its time to failure once from its own named stream of the run seed
(`failures/<pool>/<index>`, spot interruptions `spot/<pool>/<index>`, `scenarios/rng.py`), so the same seed gives
the same failures, and adding a pool or an instance never moves another instance's draws. The exponential is
memoryless: one draw at activation is the same law as a hazard applied over its whole life.
"""
from __future__ import annotations

import math

import numpy as np

from inferplan.config.fleet import FailureAt, FailurePlan
from scenarios.rng import stream

PEAK_BINS = 20            # the workload's span is cut into this many bins to find its busiest (see `peak_s`)
FLAT_SIGMAS = 4.0         # a bin is a peak only when it exceeds the mean by more than this many Poisson sigmas
FLAT_AT_FRACTION = 0.1    # a flat workload's "peak": 10% into its arrivals

SCHEDULED, RANDOM, SPOT = "scheduled", "random", "spot"   # why an instance failed (summary `failures.causes`)


def peak_s(arrival_s: np.ndarray) -> float:
    """When the traffic peaks: the start of the busiest of `PEAK_BINS` equal bins over the arrivals. A workload
    whose busiest bin is within `FLAT_SIGMAS` Poisson standard deviations of the mean bin (a constant rate: its
    busiest bin is noise) is flat, and its peak is taken `FLAT_AT_FRACTION` into its arrivals."""
    n = len(arrival_s)
    if n == 0:
        return 0.0
    t0, t1 = float(np.min(arrival_s)), float(np.max(arrival_s))
    if not t1 > t0:
        return t0
    counts, edges = np.histogram(arrival_s, bins=PEAK_BINS, range=(t0, t1))
    mean = n / PEAK_BINS
    k = int(np.argmax(counts))
    if float(counts[k]) <= mean + FLAT_SIGMAS * math.sqrt(mean):
        return t0 + FLAT_AT_FRACTION * (t1 - t0)
    return float(edges[k])


def _most_loaded_first(inst) -> tuple[int, int]:
    """Order of the victims of a given-time failure: the most requests held first, then the lowest index."""
    return (-inst.outstanding, inst.index)


class PoolFailures:
    """Runs one pool's `FailurePlan` in SimPy: given-time failures as processes started now, drawn ones armed per
    instance when it starts serving (`arm`, called by the pool). The pool fails the instance (`Pool.fail`)."""

    def __init__(self, env, pool, plan: FailurePlan, seed: int, peak_at_s: float) -> None:
        self.env, self.pool, self.plan, self.seed = env, pool, plan, seed
        self.peak_at_s = peak_at_s
        self.cold_start_s = pool.cold_start.total_s(pool.memory.weight_bytes)

    def start(self) -> None:
        """Schedule the given failures and arm the instances already serving (the pool's initial ones)."""
        for at in self.plan.given:
            self.env.process(self._given(at))
        for inst in list(self.pool.active):
            self.arm(inst)

    def arm(self, inst) -> None:
        """`inst` starts serving: draw its time to failure (and to a spot interruption) from its own streams."""
        plan, name = self.plan, self.pool.name
        if plan.mtbf_s > 0.0:
            ttf_s = float(stream(self.seed, f"failures/{name}/{inst.index}").exponential(plan.mtbf_s))
            self.env.process(self._after(ttf_s, inst, plan.repair_s, RANDOM))
        if plan.spot_mtbf_s > 0.0:
            ttf_s = float(stream(self.seed, f"spot/{name}/{inst.index}").exponential(plan.spot_mtbf_s))
            self.env.process(self._after(ttf_s, inst, 0.0, SPOT))

    def _after(self, delay_s: float, inst, repair_s: float, cause: str):
        yield self.env.timeout(delay_s)
        if inst.state == "active" or inst.state == "draining":  # (stopped or failed meanwhile: nothing to fail)
            self.pool.fail(inst, repair_s, cause)

    def _given(self, at: FailureAt):
        at_s = self.peak_at_s if at.at_peak else at.at_s
        yield self.env.timeout(max(0.0, at_s - self.env.now))
        repair_s = self.cold_start_s if at.repair_cold_start else at.repair_s
        victims = sorted(self.pool.active, key=_most_loaded_first)[:at.instances]
        for inst in victims:
            self.pool.fail(inst, repair_s, SCHEDULED)
