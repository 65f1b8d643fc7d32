"""Per-request records, the sampled time series and the run summary.

Requests are written into preallocated columns when they finish or are rejected (no per-request objects are
kept afterwards); gauges (queues, KV, instances, busy time, cost) are sampled every `sample_interval_s` by a
chain of SimPy timeouts. Percentiles over time are computed afterwards from the request columns.
"""
from __future__ import annotations

import math
from array import array
from collections.abc import Mapping
from typing import Any, Final

import numpy as np

from inferplan.columns import Columns, Derive
from inferplan.labels import Labels
from scenarios.workload import Workload
from sim.core.fleet.billing import pool_usd
from sim.core.fleet.pool import Pool
from sim.core.instance.instance import Instance
from sim.core.instance.request_state import SimRequest

STATUS = ("completed", "rejected", "unfinished")
_STATUS_INDEX = {s: i for i, s in enumerate(STATUS)}
ROWS_PER_BLOCK = 4096  # sampled rows gathered before they move to the typed arrays
_ROWS_PER_PASS: Final = 1 << 16  # request rows a derived column's temporaries cover at a time
TS_COLUMNS = ("t_s", "arrivals", "completions", "queued", "running", "instances", "kv_utilization", "busy_fraction",
              "cost_usd", "overload_level")
POOL_COLUMNS = ("t_s", "pool", "starting", "warm", "active", "draining", "queued", "running", "kv_utilization",
                "busy_fraction")


class RequestRecorder:
    """Columns of `requests.parquet`, one row per workload request, filled as requests end."""

    def __init__(self, workload: Workload, pool_names: list[str]) -> None:
        n = self.rows = len(workload)
        self.workload = workload
        self.pool_names = pool_names
        # Typed arrays (array.array: an element write from compiled code costs a fraction of a numpy one), read
        # as numpy arrays without a copy by `columns`.
        self.pool = array("h", bytes(2 * n))  # 1 + index into pool_names; 0: no pool (as prefill_pool)
        self.instance = array("i", [-1]) * n
        self.status = array("b", [2]) * n  # index into STATUS; unfinished until recorded
        self.reject_reason: dict[int, str] = {}
        self.first_token_s = array("d", [math.nan]) * n
        self.finish_s = array("d", [math.nan]) * n
        self.itl_max_s = array("d", [math.nan]) * n
        # Columns that are zero for most requests of most runs (no prefix cache, no preemption, no fallback, no
        # disaggregation) are allocated at their first non-zero value: 15 bytes a request fewer until then.
        self.cached_tokens: array | None = None      # "q"
        self.preemptions: array | None = None        # "i"
        self.fallback: array | None = None           # "b"
        self.prefill_pool: array | None = None       # "h": as `pool`
        self.arrived = 0
        self._pool_index = {p: i for i, p in enumerate(pool_names)}

    def on_arrival(self, req: SimRequest) -> None:
        self.arrived += 1

    def record(self, req: SimRequest, *, ended: bool = True) -> None:
        """Write the request's row: when it ended (completed or rejected), or, with `ended=False`, what an
        unfinished request had reached when the run stopped (its status stays `unfinished`)."""
        i = req.request_id
        if ended:
            self.status[i] = _STATUS_INDEX[req.status]
            self.finish_s[i] = req.finish_s
        if req.reject_reason:  # (why it was rejected, or `instance_failure` on a request moved off a failed instance)
            self.reject_reason[i] = req.reject_reason
        self.pool[i] = self._pool_index.get(req.pool, -1) + 1
        self.instance[i] = req.instance
        self.first_token_s[i] = req.first_token_s
        self.itl_max_s[i] = req.itl_max_s
        # (the columns start at their defaults: zero, False, no pool; only what differs is written)
        if req.cached_tokens:
            self.cached_tokens = _written(self.cached_tokens, "q", self.rows, i, req.cached_tokens)
        if req.preemptions:
            self.preemptions = _written(self.preemptions, "i", self.rows, i, req.preemptions)
        if req.fallback:
            self.fallback = _written(self.fallback, "b", self.rows, i, 1)
        if req.prefill_pool:
            self.prefill_pool = _written(self.prefill_pool, "h", self.rows, i,
                                         self._pool_index.get(req.prefill_pool, -1) + 1)

    def _reject_reasons(self, n: int) -> Labels:
        """The reject_reason column: "" but for the rejected requests and those moved off a failed instance (no
        Python list of n items on the way)."""
        names = ["", *dict.fromkeys(r for i, r in self.reject_reason.items() if i < n)]
        index = {r: k for k, r in enumerate(names)}
        codes = np.zeros(n, dtype=np.int8 if len(names) < 128 else np.int32)
        for i, reason in self.reject_reason.items():
            if i < n:
                codes[i] = index[reason]
        return Labels(codes, names)

    def columns(self) -> Columns:
        """The `requests.parquet` columns (see docs/results.md), for the requests that arrived: numbers as numpy
        arrays, strings as `Labels` (codes into their few names), views of the recorder's arrays; request id,
        TTFT, TPOT and end-to-end latency derived from them on each read (`inferplan/columns.py`: 32 bytes a
        request not kept)."""
        wl, n = self.workload, self.arrived
        pool_names = ["", *self.pool_names]
        stored = {
            "arrival_s": wl.arrival_s[:n],
            "prompt_tokens": wl.prompt_tokens[:n],
            "output_tokens": wl.output_tokens[:n],
            "cached_tokens": _numpy_or_zeros(self.cached_tokens, "q", n),
            "request_class": Labels(wl.request_class[:n], wl.class_names),
            "pool": Labels(_numpy(self.pool, n), pool_names),
            "instance": _numpy(self.instance, n),
            "status": Labels(_numpy(self.status, n), STATUS),
            "reject_reason": self._reject_reasons(n),
            "first_token_s": _numpy(self.first_token_s, n),
            "finish_s": _numpy(self.finish_s, n),
            "itl_max_s": _numpy(self.itl_max_s, n),
            "preemptions": _numpy_or_zeros(self.preemptions, "i", n),
            "fallback": _numpy_or_zeros(self.fallback, "b", n).view(np.bool_),  # (0/1 bytes: a view)
            "prefill_pool": Labels(_numpy_or_zeros(self.prefill_pool, "h", n), pool_names),
        }
        return Columns(stored, DERIVED, REQUEST_COLUMNS)


def _request_id(c: Mapping[str, Any], lo: int) -> Any:
    """Row numbers: the workload's request index."""
    return np.arange(lo, lo + len(c["arrival_s"]), dtype=np.int64)


def _ttft_s(c: Mapping[str, Any], lo: int) -> Any:
    return c["first_token_s"] - c["arrival_s"]


def _e2e_s(c: Mapping[str, Any], lo: int) -> Any:
    return c["finish_s"] - c["arrival_s"]


def _tpot_s(c: Mapping[str, Any], lo: int) -> Any:
    """(finish - first token) / (output tokens - 1); NaN for one token. In place: no temporaries beside it."""
    out_tok = c["output_tokens"]
    tpot = c["finish_s"] - c["first_token_s"]
    for lo in range(0, len(tpot), _ROWS_PER_PASS):  # (the divisors a slice at a time: no 8 bytes a row beside it)
        gaps = np.subtract(out_tok[lo:lo + _ROWS_PER_PASS], 1, dtype=np.float64)  # (tokens after the first: exact)
        np.maximum(gaps, 1.0, out=gaps)
        part = tpot[lo:lo + _ROWS_PER_PASS]
        np.divide(part, gaps, out=part)
    tpot[out_tok <= 1] = np.nan
    return tpot


# The request table's columns in file order (sim/results/schema.py REQUEST_TYPES), and those derived on reading.
REQUEST_COLUMNS = ("request_id", "arrival_s", "prompt_tokens", "output_tokens", "cached_tokens", "request_class",
                   "pool", "instance", "status", "reject_reason", "first_token_s", "finish_s", "ttft_s", "tpot_s",
                   "e2e_s", "itl_max_s", "preemptions", "fallback", "prefill_pool")
DERIVED: dict[str, Derive] = {"request_id": _request_id, "ttft_s": _ttft_s, "tpot_s": _tpot_s, "e2e_s": _e2e_s}


def _numpy(values: array, n: int) -> np.ndarray:
    """The first n items of a typed array as a numpy array of its type: a view, not a copy (the recorder lives as
    long as the cluster that holds it, so a copy would keep every column twice; the view keeps the array alive, and
    the arrays are never resized). Read-only: a write into a result column must not reach the recorder."""
    view = np.frombuffer(values, dtype=values.typecode)[:n]
    view.setflags(write=False)
    return view


def _written(values: array | None, typecode: str, n: int, i: int, value: int) -> array:
    """A lazily allocated column (n zeros of `typecode` at its first write) with row i set to `value`."""
    if values is None:
        values = array(typecode, bytes(array(typecode).itemsize * n))
    values[i] = value
    return values


def _numpy_or_zeros(values: array | None, typecode: str, n: int) -> np.ndarray:
    """`_numpy(values, n)`, or, for a column never written (None), n zeros of its type that take no memory (a
    read-only broadcast of one element)."""
    if values is None:
        return np.broadcast_to(np.zeros(1, dtype=typecode), (n,))
    return _numpy(values, n)


def percentiles(values: np.ndarray, mask: np.ndarray | None = None) -> dict[str, float]:
    """p50/p90/p99/mean of the finite values (of those where `mask` is true): one copy of them, partitioned in
    place (the mean is taken first, in the values' order)."""
    ok = np.isfinite(values)
    if mask is not None:
        ok &= mask
    v = values[ok]
    del ok
    if v.size == 0:
        return {"p50": math.nan, "p90": math.nan, "p99": math.nan, "mean": math.nan}
    mean = float(v.mean())
    p50, p90, p99 = np.percentile(v, [50, 90, 99], overwrite_input=True)
    return {"p50": float(p50), "p90": float(p90), "p99": float(p99), "mean": mean}


class Sampler:
    """Samples the fleet's gauges every `interval_s` simulated seconds (a chain of SimPy timeouts)."""

    def __init__(self, env, cluster, interval_s: float, progress=None) -> None:
        self.env, self.cluster, self.interval_s = env, cluster, interval_s
        self.progress = progress
        self._ts_rows = array("d")          # TS_COLUMNS values, one row per interval, end to end
        self._pool_rows = array("d")        # POOL_COLUMNS values (the pool as its index), per (interval, pool)
        # Rows gather in lists and move to the typed arrays in blocks (an array grows by a few percent per
        # append; a block of rows at a time is one resize): memory stays 8 bytes per value.
        self._ts_buf: list[float] = []
        self._pool_buf: list[float] = []
        self._pool_names = list(cluster.pools)
        self.last_t_s: float | None = None  # the time of the last sample
        self.cost_usd = 0.0                 # USD billed to the last sample (billing.pool_usd, summed over pools)
        self.granularity_s: float = cluster.run.scenario.billing_granularity_s
        self._last_arrived = 0
        self._last_completed = 0
        self._pools: list[Pool] = list(cluster.pools.values())
        self._last_busy = [0.0] * len(self._pools)
        self.peak_instances: dict[str, int] = dict.fromkeys(cluster.pools, 0)
        env.process(self._start())

    def columns(self) -> tuple[dict[str, np.ndarray], dict[str, list]]:
        """The samples as columns: (TS_COLUMNS -> float64 array per interval, POOL_COLUMNS -> list per
        (interval, pool): pool names, floats for times and fractions, ints for counts)."""
        self._flush()
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

    def _flush(self) -> None:
        self._ts_rows.fromlist(self._ts_buf)
        self._pool_rows.fromlist(self._pool_buf)
        self._ts_buf, self._pool_buf = [], []

    def _start(self):
        """A process only to start the chain (at the start of the run, as a process would): each sample is then a
        timeout's callback, which costs a fraction of resuming a generator."""
        self._next_tick()
        return
        yield

    def _next_tick(self) -> None:
        ev = self.env.timeout(self.interval_s)
        ev.callbacks.append(self._tick)

    def _tick(self, _event) -> None:
        self.sample()
        self._next_tick()

    def sample(self) -> None:
        env, cl, dt = self.env, self.cluster, self.interval_s
        t = env.now
        queued = running = active = 0
        used = cap = 0
        busy_all = 0.0
        completed = 0
        n_serving = 0
        cost_usd, granularity_s = 0.0, self.granularity_s
        for pool_index, pool in enumerate(self._pools):
            starting = warm = n_active = draining = stopped = 0
            q, r, u, c, busy = len(pool.held), 0, 0, 0, 0.0
            instances: list[Instance] = pool.instances
            for i in instances:  # one pass: this runs every sample interval over every instance
                state = i.state
                busy += i.busy_s
                if state == "active" or state == "draining":
                    if state == "active":
                        n_active += 1
                    else:
                        draining += 1
                    pol, kv = i.policy, i.kv
                    q += len(pol.waiting)
                    r += len(pol.running)
                    u += kv.used_blocks
                    c += kv.num_blocks
                elif state == "stopped":
                    stopped += 1
                elif state == "warm":
                    warm += 1
                else:  # starting or warming
                    starting += 1
            serving = n_active + draining
            live = len(pool.instances) - stopped
            busy_frac = (busy - self._last_busy[pool_index]) / (serving * dt) if serving else 0.0
            self._last_busy[pool_index] = busy
            cost_usd += pool_usd(pool, t, granularity_s)  # (the bill to date: one rule, sim/core/fleet/billing.py)
            self._pool_buf.extend((t, pool_index, starting, warm, n_active, draining, q, r, u / c if c else 0.0,
                                   min(1.0, busy_frac)))
            queued, running, active, used, cap = queued + q, running + r, active + n_active, used + u, cap + c
            busy_all += busy_frac * serving
            n_serving += serving
            completed += pool.completed
            if live > self.peak_instances[pool.name]:
                self.peak_instances[pool.name] = live
        row = [t, cl.recorder.arrived - self._last_arrived, completed - self._last_completed, queued, running, active,
               used / cap if cap else 0.0, min(1.0, busy_all / n_serving) if n_serving else 0.0, cost_usd,
               cl.overload.level]
        self.cost_usd = cost_usd
        self._ts_buf.extend(row)
        if len(self._ts_buf) >= ROWS_PER_BLOCK * len(TS_COLUMNS):
            self._flush()
        self.last_t_s = t
        self._last_arrived, self._last_completed = cl.recorder.arrived, completed
        if self.progress is not None:
            self.progress(t)
