"""Per-request records, the sampled time series and the run summary.

Requests are written into preallocated columns when they finish or are rejected (no per-request objects are
kept afterwards); gauges (queues, KV, instances, busy time, cost) are sampled every `sample_interval_s` by a
SimPy process. Percentiles over time are computed afterwards from the request columns.
"""
from __future__ import annotations

import math
from array import array

import numpy as np

from scenarios.workload import Workload
from sim.instance.request_state import SimRequest

STATUS = ("completed", "rejected", "unfinished")
TS_COLUMNS = ("t_s", "arrivals", "completions", "queued", "running", "instances", "kv_utilization", "busy_fraction",
              "cost_usd", "overload_level")
POOL_COLUMNS = ("t_s", "pool", "starting", "warm", "active", "draining", "queued", "running", "kv_utilization",
                "busy_fraction")


class RequestRecorder:
    """Columns of `requests.parquet`, one row per workload request, filled as requests end."""

    def __init__(self, workload: Workload, pool_names: list[str]) -> None:
        n = len(workload)
        self.workload = workload
        self.pool_names = pool_names
        self.cached_tokens = np.zeros(n, np.int64)
        self.pool = np.full(n, -1, np.int16)
        self.instance = np.full(n, -1, np.int32)
        self.status = np.full(n, 2, np.int8)  # index into STATUS; unfinished until recorded
        self.reject_reason: dict[int, str] = {}
        self.first_token_s = np.full(n, np.nan)
        self.finish_s = np.full(n, np.nan)
        self.preemptions = np.zeros(n, np.int32)
        self.fallback = np.zeros(n, bool)
        self.prefill_pool = np.full(n, -1, np.int16)
        self.arrived = 0
        self._pool_index = {p: i for i, p in enumerate(pool_names)}

    def on_arrival(self, req: SimRequest) -> None:
        self.arrived += 1

    def record(self, req: SimRequest, *, ended: bool = True) -> None:
        """Write the request's row: when it ended (completed or rejected), or, with `ended=False`, what an
        unfinished request had reached when the run stopped (its status stays `unfinished`)."""
        i = req.request_id
        if ended:
            self.status[i] = STATUS.index(req.status)
            if req.reject_reason:
                self.reject_reason[i] = req.reject_reason
            self.finish_s[i] = req.finish_s
        self.pool[i] = self._pool_index.get(req.pool, -1)
        self.instance[i] = req.instance
        self.cached_tokens[i] = req.cached_tokens
        self.first_token_s[i] = req.first_token_s
        self.preemptions[i] = req.preemptions
        self.fallback[i] = req.fallback
        self.prefill_pool[i] = self._pool_index.get(req.prefill_pool, -1)

    def columns(self) -> dict[str, np.ndarray]:
        """The `requests.parquet` columns (see docs/results.md), for the requests that arrived."""
        wl, n = self.workload, self.arrived
        arrival = wl.arrival_s[:n]
        out_tok = wl.output_tokens[:n]
        first, finish = self.first_token_s[:n], self.finish_s[:n]
        with np.errstate(invalid="ignore", divide="ignore"):
            tpot = np.where(out_tok > 1, (finish - first) / np.maximum(out_tok - 1, 1), np.nan)
        pool_names = np.array([""] + list(self.pool_names), dtype=object)
        return {
            "request_id": np.arange(n, dtype=np.int64),
            "arrival_s": arrival,
            "prompt_tokens": wl.prompt_tokens[:n],
            "output_tokens": out_tok,
            "cached_tokens": self.cached_tokens[:n],
            "request_class": np.array(wl.class_names, dtype=object)[wl.request_class[:n]],
            "pool": pool_names[self.pool[:n] + 1],
            "instance": self.instance[:n],
            "status": np.array(STATUS, dtype=object)[self.status[:n]],
            "reject_reason": np.array([self.reject_reason.get(i, "") for i in range(n)], dtype=object),
            "first_token_s": first,
            "finish_s": finish,
            "ttft_s": first - arrival,
            "tpot_s": tpot,
            "e2e_s": finish - arrival,
            "preemptions": self.preemptions[:n],
            "fallback": self.fallback[:n],
            "prefill_pool": pool_names[self.prefill_pool[:n] + 1],
        }


def percentiles(values: np.ndarray) -> dict[str, float]:
    """p50/p90/p99/mean of the finite values (NaN when there are none)."""
    v = values[np.isfinite(values)]
    if v.size == 0:
        return {"p50": math.nan, "p90": math.nan, "p99": math.nan, "mean": math.nan}
    p50, p90, p99 = np.percentile(v, [50, 90, 99])
    return {"p50": float(p50), "p90": float(p90), "p99": float(p99), "mean": float(v.mean())}


class Sampler:
    """A SimPy process that samples the fleet's gauges every `interval_s` simulated seconds."""

    def __init__(self, env, cluster, interval_s: float, progress=None) -> None:
        self.env, self.cluster, self.interval_s = env, cluster, interval_s
        self.progress = progress
        self._ts_rows = array("d")          # TS_COLUMNS values, one row per interval, end to end
        self._pool_rows = array("d")        # POOL_COLUMNS values (the pool as its index), per (interval, pool)
        self._pool_names = list(cluster.pools)
        self.last_t_s: float | None = None  # the time of the last sample
        self.cost_usd = 0.0
        self._last_arrived = 0
        self._last_completed = 0
        self._last_busy = {name: 0.0 for name in cluster.pools}
        self.peak_instances: dict[str, int] = {}
        self._process = env.process(self._run())

    def columns(self) -> tuple[dict[str, np.ndarray], dict[str, list]]:
        """The samples as columns: (TS_COLUMNS -> float64 array per interval, POOL_COLUMNS -> list per
        (interval, pool): pool names, floats for times and fractions, ints for counts)."""
        rows = np.frombuffer(self._ts_rows, dtype=np.float64).reshape(-1, len(TS_COLUMNS))
        ts = {k: rows[:, j].copy() for j, k in enumerate(TS_COLUMNS)}
        rows = np.frombuffer(self._pool_rows, dtype=np.float64).reshape(-1, len(POOL_COLUMNS))
        pools = {}
        for j, k in enumerate(POOL_COLUMNS):
            col = rows[:, j]
            if k == "pool":
                pools[k] = [self._pool_names[int(i)] for i in col]
            elif k in ("t_s", "kv_utilization", "busy_fraction"):
                pools[k] = col.tolist()
            else:
                pools[k] = col.astype(np.int64).tolist()
        return ts, pools

    def _run(self):
        while True:
            yield self.env.timeout(self.interval_s)
            self.sample()

    def sample(self) -> None:
        env, cl, dt = self.env, self.cluster, self.interval_s
        t = env.now
        queued = running = active = 0
        used = cap = 0
        busy_all = 0.0
        completed = 0
        n_serving = 0
        for pool_index, (name, pool) in enumerate(cl.pools.items()):
            counts = dict.fromkeys(("starting", "warming", "warm", "active", "draining", "stopped"), 0)
            q, r, u, c, busy = len(pool.held), 0, 0, 0, 0.0
            for i in pool.instances:  # one pass: this runs every sample interval over every instance
                counts[i.state] += 1
                busy += i.busy_s
                if i.state == "active" or i.state == "draining":
                    pol, kv = i.policy, i.kv
                    q += len(pol.waiting)
                    r += len(pol.running)
                    u += kv.used_blocks
                    c += kv.num_blocks
            serving = counts["active"] + counts["draining"]
            live = len(pool.instances) - counts["stopped"]
            n_active = counts["active"]
            busy_frac = (busy - self._last_busy[name]) / (serving * dt) if serving else 0.0
            self._last_busy[name] = busy
            self.cost_usd += live * pool.usd_per_hour * dt / 3600.0
            self._pool_rows.extend((t, pool_index, counts["starting"] + counts["warming"], counts["warm"], n_active,
                                    counts["draining"], q, r, u / c if c else 0.0, min(1.0, busy_frac)))
            queued, running, active, used, cap = queued + q, running + r, active + n_active, used + u, cap + c
            busy_all += busy_frac * serving
            n_serving += serving
            completed += pool.completed
            self.peak_instances[name] = max(self.peak_instances.get(name, 0), live)
        row = (t, cl.arrived - self._last_arrived, completed - self._last_completed, queued, running, active,
               used / cap if cap else 0.0, min(1.0, busy_all / n_serving) if n_serving else 0.0, self.cost_usd,
               cl.overload.level)
        self._ts_rows.extend(row)
        self.last_t_s = t
        self._last_arrived, self._last_completed = cl.arrived, completed
        if self.progress is not None:
            self.progress(t)
