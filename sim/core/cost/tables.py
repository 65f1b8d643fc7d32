"""The one cache of step costs, read for every iteration the simulator plans (`StepCache`).

It is the only memo of prices: the pricing it wraps (`LayeredCostModel._price`, `SyntheticCostModel._price`) is
a pure function of a shape, and what a scheduled iteration adds to its shape's price (KV loads, exposed host
work: `sim.core.cost.host_overlap`) is applied outside it, on the value it returns, so an iteration that adds
nothing (the common case) is priced by reading the cache alone.

Everything it keeps is a pure function of a shape (`CostModel` contract): which shapes were met before, and in
which order, changes only how much is priced, never a value. So one model can serve many runs (a worker's sweep,
`sim.core.cost.factory`) and eviction only costs re-pricing. It keeps, under one key type (`ShapeKey`: a
`BatchShape`'s fields but its decode context sum) and one bound (`KEPT_VALUES` floats in all):

* decode-only shapes: a `StepTable` of step costs over a window of context sums; a run of decode iterations whose
  contexts grow by one token per sequence per step is a strided slice of it (`decode_steps`), summed without
  per-run arrays;
* prefill-only shapes: the `StepCost` by shape (their context sum is 0);
* below the steps, a layer's context-free part by its work (`layers.LayerPricer.layer`), split into the part that
  depends on its rows only and its prefill attention, each kept by what it depends on, and op times by their
  arguments (`layers.LayerPricer.gemm`): steps of different shapes share them.

Mixed shapes (prefill chunks and decodes) are composed in full at their context sum, from those kept parts: most
mixed shapes occur once in a run, so a per-shape form over the decode context would be built for nothing.

The pricing itself comes from the cost model through callbacks (`sim.core.cost.roofline`).
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

import numpy as np

from sim.core.cost.base import PARTS, BatchShape, StepCost

# Floats kept by one cost model's cache, all kinds together: a table or a context window counts its width, a kept
# step cost, layer part or op time counts PER_SHAPE (a StepCost is about 0.5 kB: a dict of seven floats). Each float
# is 32-40 bytes with its list slot and varying parts: about 60 MB at most per model.
KEPT_VALUES = 1 << 21
PER_SHAPE = 16
# Context tables one decode-only shape keeps at once (see `StepCache.table`).
WINDOWS_PER_SHAPE = 8
_N_PARTS: Final = len(PARTS)

# A BatchShape without its decode context sum (fields 0-5 and 7): what everything is kept under (a decode-only
# shape's context sum indexes its table instead). A plain tuple of ints, made by `shape_key` for every iteration.
ShapeKey = tuple[int, int, int, int, int, int, int]


def shape_key(b: BatchShape) -> ShapeKey:
    return (b[0], b[1], b[2], b[3], b[4], b[5], b[7])


def _compact(value: Any) -> Any:
    """A priced value over an array of contexts: the array when it varies with the context, else a float."""
    return value if np.ndim(value) else float(value)


class StepTable:
    """Step costs at context sums lo..hi-1 of one decode-only shape (or, from `StepTable.priced`, of any run).

    `times[i]` is the iteration's total at context sum lo + i, a list of Python floats: bit for bit what pricing
    that one step gives (the array and float paths of the composition are the same IEEE operations;
    tests/cost/test_decode_run.py), so a run summed from it equals stepping. `parts` maps each part to a float
    when it is the same at every context, else to a read-only array over the contexts; `hidden` likewise."""

    def __init__(self, lo: int, hi: int, times: list[float], parts: dict[str, Any], hidden: Any) -> None:
        self.lo = lo
        self.hi = hi
        self.times = times
        self.parts = parts
        self.hidden = hidden
        # The parts in PARTS order as a vector: constants, and which positions vary instead.
        self.const_vec: list[float] = [0.0 if isinstance(parts[k], np.ndarray) else float(parts[k]) for k in PARTS]
        self.const_idx: list[int] = [j for j, k in enumerate(PARTS) if not isinstance(parts[k], np.ndarray)]
        self.varying_idx: list[int] = [j for j, k in enumerate(PARTS) if isinstance(parts[k], np.ndarray)]
        for v in (hidden, *parts.values()):  # runs may hand out views: nothing may write into the table
            if isinstance(v, np.ndarray):
                v.setflags(write=False)

    @staticmethod
    def priced(lo: int, hi: int, total: Any, parts: dict[str, Any], hidden: Any) -> StepTable:
        """A table from the cost model's results over contexts lo..hi-1 (arrays, or floats where constant)."""
        times: list[float] = np.broadcast_to(np.asarray(total, dtype=np.float64), (hi - lo,)).tolist()
        return StepTable(lo, hi, times, {k: _compact(parts[k]) for k in PARTS}, _compact(hidden))

    @staticmethod
    def join(old: StepTable | None, pieces: list[StepTable]) -> StepTable:
        """`old` extended by adjacent `pieces` below and/or above it (or the one piece when there is no old)."""
        tables = list(pieces) if old is None else [*pieces, old]
        tables.sort(key=lambda t: t.lo)
        if len(tables) == 1:
            return tables[0]
        times: list[float] = []
        for t in tables:
            times.extend(t.times)

        def cat(values: list[Any]) -> Any:
            return np.concatenate(values) if isinstance(values[0], np.ndarray) else values[0]
        return StepTable(tables[0].lo, tables[-1].hi, times, {k: cat([t.parts[k] for t in tables]) for k in PARTS},
                         cat([t.hidden for t in tables]))

    def step(self, ctx_sum: int) -> StepCost:
        """The StepCost at one context sum."""
        i = ctx_sum - self.lo
        parts = dict(self.parts)
        for j in self.varying_idx:
            k = PARTS[j]
            parts[k] = float(parts[k][i])
        hidden = float(self.hidden[i]) if isinstance(self.hidden, np.ndarray) else float(self.hidden)
        return StepCost(self.times[i], parts, hidden)

    def run_parts(self, first: int, stride: int, n: int, busy_s: float) -> tuple[list[float], float]:
        """Each part's seconds (PARTS order) over the n steps first, first + stride, ... (whose times sum to
        busy_s), and their hidden communication. Constant parts are multiplied; when one part varies (decode
        attention, as a rule) it is the busy time minus the others (the parts sum to the total), which saves
        summing it."""
        out = [0.0] * _N_PARTS
        const, rest = self.const_vec, 0.0
        for j in self.const_idx:
            v = const[j] * n
            out[j] = v
            rest += v
        varying = self.varying_idx
        if len(varying) == 1:
            out[varying[0]] = max(0.0, busy_s - rest)
        else:
            for j in varying:
                out[j] = _strided_sum(self.parts[PARTS[j]], first, stride, n)
        hidden = self.hidden
        hidden_s = _strided_sum(hidden, first, stride, n) if isinstance(hidden, np.ndarray) else float(hidden) * n
        return out, hidden_s

    def run_arrays(self, first: int, stride: int, steps: int, with_hidden: bool, compact: bool) -> tuple:
        """The run's steps as arrays (the `decode_run` surface): totals, parts and hidden per step; with `compact`,
        what is constant stays a float."""
        idx = np.arange(steps) * stride + first
        total = np.asarray(self.times, dtype=np.float64)[idx]
        parts: dict[str, Any] = {}
        for k, v in self.parts.items():
            if isinstance(v, np.ndarray):
                parts[k] = v[idx]
            else:
                parts[k] = float(v) if compact else np.full(steps, float(v))
        h = self.hidden
        hidden = h[idx] if isinstance(h, np.ndarray) else (float(h) if compact else np.full(steps, float(h)))
        return (total, parts, hidden) if with_hidden else (total, parts)


def _strided_sum(values: Any, first: int, stride: int, n: int) -> float:
    if stride == 0:
        return float(values[first]) * n
    return float(values[first:first + n * stride:stride].sum())


class StepCache:
    """A cost model's kept step costs (see the module doc): tables of decode-only shapes and prefill-only step
    costs by `ShapeKey`, layers' context-free parts and op times below them, within `max_values` floats.

    `price_contexts(shape, contexts)` prices `shape` at an array of context sums ((total, parts, hidden), arrays or
    floats); `price_step(shape)` prices one step in full. Tables are evicted least recently used first; the other
    kinds oldest first (`remember`)."""

    def __init__(self, price_contexts: Callable[[BatchShape, Any], tuple[Any, Any, Any]],
                 price_step: Callable[[BatchShape], StepCost], max_values: int = KEPT_VALUES) -> None:
        self.price_contexts = price_contexts
        self.price_step = price_step
        self.max_values = max_values
        self.tables: OrderedDict[ShapeKey, list[StepTable]] = OrderedDict()  # windows, most recent first
        self.entries = 0  # floats held by the tables
        self.exact: dict[ShapeKey, StepCost] = {}
        # A layer's context-free part by (work, MoE), and the part of it that depends on its rows only (keys
        # tagged "rows"): layers.LayerCost.
        self.layers: dict[tuple, Any] = {}
        # A GEMM's seconds by (rows, n, k, dtype); a layer's prefill attention by its prefill fields (keys tagged
        # "attn_prefill").
        self.ops: dict[tuple, float] = {}

    def step_cost(self, b: BatchShape) -> StepCost:
        """The iteration's cost: a decode-only shape from its context table, a prefill-only shape as kept; the
        rest (mixed shapes, decode shapes too wide for a table) is composed in full (the prefill-only kept)."""
        if b.decode_seqs:
            if not b.prefill_seqs:
                table = self.table(b, b.decode_ctx_sum)
                if table is not None:
                    return table.step(b.decode_ctx_sum)
            return self.price_step(b)
        key = shape_key(b)
        cost = self.exact.get(key)
        if cost is None:
            cost = self.price_step(b)
            self.remember(self.exact, key, cost)
        return cost

    def remember(self, memo: dict, key: Any, value: Any) -> None:
        """Keep `value` in one of the per-shape memos, dropping the oldest entries past the memos' share of the
        bound (half of it; the tables hold the rest)."""
        limit = (self.max_values >> 1) // PER_SHAPE
        if len(memo) >= limit:
            for old in list(memo)[:max(1, limit >> 3)]:  # (an eighth at once: the scan is not per insertion)
                del memo[old]
        memo[key] = value

    def decode_steps(self, b: BatchShape, steps: int) -> tuple[StepTable, int, int]:
        """A run of `steps` decode-only iterations of the same sequences, the first of shape b, every context one
        token longer per step: (table, first, stride) such that step j is `table.times[first + j * stride]`."""
        if b.decode_seqs:
            table = self.table(b, b.decode_ctx_sum + b.decode_seqs * (steps - 1))
            if table is not None:
                return table, b.decode_ctx_sum - table.lo, b.decode_seqs
        ctx_sums = b.decode_ctx_sum + b.decode_seqs * np.arange(steps, dtype=np.float64)
        total, parts, hidden = self.price_contexts(b, ctx_sums)
        return StepTable.priced(0, steps, total, parts, hidden), 0, 1

    def table(self, b: BatchShape, last_ctx_sum: int) -> StepTable | None:
        """The step-cost table of b's shape covering context sums b.decode_ctx_sum..last_ctx_sum: found, extended
        (each growth adds at least the width it had, so every entry is priced O(1) times), or built. A shape keeps
        up to `WINDOWS_PER_SHAPE` tables at different context sums, most recently used first: the instances of a
        pool share its model, and each decodes its own sequences at its own context sums, so one window per shape
        would be moved back and forth between them. Shapes are evicted least recently used first to stay within
        half the bound (`max_values`); None when one table alone would exceed it."""
        key = shape_key(b)
        first = b.decode_ctx_sum
        windows = self.tables.get(key)
        if windows is None:
            windows = self.tables[key] = []
        else:
            self.tables.move_to_end(key)
        for i, t in enumerate(windows):
            if t.lo <= first and last_ctx_sum < t.hi:
                if i:
                    windows.insert(0, windows.pop(i))
                return t
        table: StepTable | None = None
        lo = hi = 0
        for i, t in enumerate(windows):
            width = t.hi - t.lo
            if not (last_ctx_sum < t.lo - width or first >= t.hi + width):
                table = windows.pop(i)  # near enough: extend this one (rather than start one beside it)
                lo = t.lo if first >= t.lo else max(0, first - width)
                hi = t.hi if last_ctx_sum < t.hi else last_ctx_sum + 1 + width
                break
        if table is None:
            lo, hi = max(0, first - 256), last_ctx_sum + 1 + max(1024, last_ctx_sum + 1 - first)
        if hi - lo > self.max_values // 2:
            if table is not None:
                windows.insert(0, table)
            elif not windows:
                del self.tables[key]
            return None
        base = b._replace(decode_ctx_sum=0)
        segments = [(lo, hi)] if table is None else [(lo, table.lo), (table.hi, hi)]
        pieces = []
        for a, z in segments:
            if z > a:
                total, parts, hidden = self.price_contexts(base, np.arange(a, z, dtype=np.float64))
                pieces.append(StepTable.priced(a, z, total, parts, hidden))
        if table is not None:
            self.entries -= table.hi - table.lo
        table = StepTable.join(table, pieces)
        windows.insert(0, table)
        self.entries += table.hi - table.lo
        while len(windows) > WINDOWS_PER_SHAPE:
            old = windows.pop()
            self.entries -= old.hi - old.lo
        tables = self.tables
        while self.entries > self.max_values // 2 and len(tables) > 1:
            _, gone = tables.popitem(last=False)
            for old in gone:
                self.entries -= old.hi - old.lo
        if self.entries > self.max_values // 2:  # (one shape left: its older windows go)
            while len(windows) > 1:
                old = windows.pop()
                self.entries -= old.hi - old.lo
        return table
