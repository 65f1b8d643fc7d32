"""`GridLookup`: a `GridModel`'s prices at the rate a simulator asks for them: the same numbers, sliced and kept.

    lookup = GridLookup(model)
    lookup.latency_s(op, **shape)      # == model.latency_s(op, **shape) up to rounding, in microseconds
    curve = lookup.curve(op, **fixed)  # the op with every argument but the free ones (`FREE`) fixed
    curve(*free)                       # seconds: the same number, without the keyword dispatch

A pricer varies few arguments of an op from call to call (a GEMM's rows, never its N and K for a given
projection; attention's batch and length, never its heads), and the grid form (`grid.py`) is multilinear in the
log of every dense axis. Restricted to the varying axes (`FREE`) with everything else fixed, it is therefore
piecewise linear (one free axis) or bilinear (two) between the measured knots of those axes: the union over the
family's cells, where nearest-combo blends and each cell's own clamping break. A `_Slice` per fixed-argument
combination evaluates the grid once at those knots (one vectorised call: about a millisecond, a few dozen per
pool) and every later query interpolates them. Clamping is the grid's: below a dense axis' smallest measured value
the query is priced at it; above the largest, the edge's log efficiency over the reference time of the actual
shape (`grid.reference_s`; inlined here for GEMM and attention, the ops priced most often).

Exactness: knot values are log(latency / reference) recovered from the grid's own latencies, so a query equals
`GridModel.latency_s` up to a log/exp round trip (relative 1e-15; tests/calibrate/test_aic_lookup.py). Queries
with two free axes (attention) take the same operations in the same order whether their arguments are floats or
arrays (numpy's log and exp on a float are its array loops on one element), so a decode step priced alone equals
the same step of an array over a run of steps bit for bit. No file is read.
"""
from __future__ import annotations

import bisect
import math
from typing import Any

import numpy as np

from calibrate import ops
from calibrate.aic.grid import ALIGN, ALIGNED, FAMILIES, MLA_PREFILL_DIM, UNALIGNED, reference_s
from calibrate.aic.names import MLA_DIMS
from calibrate.aic.grid_model import _SIGNATURES, GridModel

# The arguments a pricer varies between calls of one op (a slice's free axes); everything else keys a slice.
FREE: dict[str, tuple[str, ...]] = {
    "gemm": ("m",), "attn_prefill": ("batch", "seq"), "attn_decode": ("batch", "ctx"), "moe_gemm": ("tokens",),
    "allreduce": ("bytes",), "all_gather": ("bytes",), "reduce_scatter": ("bytes",), "all_to_all": ("bytes",),
    "attn_mla_prefill": ("batch", "seq"), "attn_mla_decode": ("batch", "ctx"), "deepep_dispatch": ("tokens",),
    "deepep_combine": ("tokens",), "mla_bmm_pre": ("tokens",), "mla_bmm_post": ("tokens",),
    "gdn_conv_prefill": ("batch", "seq"), "gdn_chunk_prefill": ("batch", "seq"), "gdn_conv_decode": ("batch",),
    "gdn_recurrent_decode": ("batch",), "dsa_module_prefill": ("batch", "seq"), "dsa_module_decode": ("batch", "ctx"),
}


def _larger(a: Any, b: Any) -> Any:
    """max for floats, np.maximum for arrays (the same value either way)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.maximum(a, b)
    return a if a >= b else b


class _Slice:
    """The grid of one (family, exact-match key, combo, fixed dense values) over its free dense axes: log knots,
    the log inverse efficiency at every knot (a 1-D or 2-D table) and the reference time's terms.

    Along an axis: segment i = the count of inner knots <= log x (the segment of the clamped value, no index
    clamping), then v = v_i + (log x - k_i) (v_i+1 - v_i) / (k_i+1 - k_i), with the reciprocal spans and, in 1-D,
    the slopes kept. Two axes: along the first at both knots of the second's segment, then along the second.
    Floats and arrays take the same operations in the same order."""

    def __init__(self, model: GridModel, family: str, key: tuple[str, ...], combo: tuple[float, ...],
                 fixed: dict[str, float], free: tuple[str, ...]) -> None:
        spec = FAMILIES[family]
        g = model.grid(family)
        assert g is not None  # (the caller routed to a family the profile has)
        _, cells = g.groups[key]
        lows = dict(zip(spec.dense, g.lows[key]))
        self.family, self.peaks, self.free = family, model.peaks, free
        self.cat = dict(zip(spec.cat, key))
        # (fixed dense values clamped below as the grid clamps them: the reference times are the grid's)
        self.base: dict[str, Any] = {**dict(zip(spec.combo, combo)),
                                     **{c: max(x, lows[c]) for c, x in fixed.items()}}
        self.lows = [lows[c] for c in free]
        self.knots = [np.unique(np.concatenate([cell.axes[spec.dense.index(c)] for cell in cells])) for c in free]
        self.inner = [k[1:-1] for k in self.knots]
        self.inv = [1.0 / (k[1:] - k[:-1]) if len(k) > 1 else np.zeros(1) for k in self.knots]
        self.knot_list: list[list[float]] = [k.tolist() for k in self.knots]
        self.inner_list: list[list[float]] = [k.tolist() for k in self.inner]
        self.inv_list: list[list[float]] = [k.tolist() for k in self.inv]
        self._terms()
        points = np.meshgrid(*[np.exp(k) for k in self.knots], indexing="ij")
        dense = tuple(points[free.index(c)] if c in free else np.full(points[0].shape, float(fixed[c]))
                      for c in spec.dense)
        t = g.latency_s(key, combo, dense)
        self.values = np.log(t / self.reference(*points))
        self.value_list: Any = self.values.tolist()
        v = self.values
        self.slopes = (v[1:] - v[:-1]) * self.inv[0] if len(free) == 1 and len(v) > 1 else np.zeros(1)
        self.slope_list: list[float] = self.slopes.tolist()

    def _terms(self) -> None:
        """The constants of the inlined reference times (`grid.reference_s`'s formulas over `calibrate.ops` work,
        rearranged: linear in the free values)."""
        b, p = self.base, self.peaks
        bw = float(p.mem_bytes_per_s)
        self.terms: tuple[float, ...] = ()
        if self.family == "gemm":  # max(2 m n k / peak, (n k wb + m (k ab + 2 n)) / bw)
            fmt = ops.check_dtype(self.cat["dtype"])
            n, k = b["n"], b["k"]
            peak = float(p.flops(self.cat["dtype"]))
            self.terms = (2.0 * n * k / peak, n * k * float(fmt["weight_bytes"]) / bw,
                          (k * float(fmt["act_bytes"]) + 2.0 * n) / bw)
        elif self.family in ("attn_prefill", "attn_decode"):
            h, kv, d = b["heads"], b["kv_heads"], b["head_dim"]
            kv_bytes = float(ops.check_dtype(self.cat["dtype"])["act_bytes"])
            peak = float(p.flops(self.cat["compute"]))
            # per attended (query, key) pair 4 h d FLOPs; per cached (decode) or new (prefill) token the K and V
            # bytes 2 kv d kv_bytes; per query token Q in and O out, 4 h d bytes
            self.terms = (4.0 * h * d / peak, 2.0 * kv * d * kv_bytes / bw, 4.0 * h * d / bw)
        elif self.family in ("mla_prefill", "mla_decode"):
            h = b["heads"]
            kv_bytes = float(ops.check_dtype(self.cat["dtype"])["act_bytes"])
            peak = float(p.flops(self.cat["compute"]))
            if self.family == "mla_prefill":  # attn_prefill's terms with kv_heads = heads, MLA_PREFILL_DIM wide
                d = MLA_PREFILL_DIM
                self.terms = (4.0 * h * d / peak, 2.0 * h * d * kv_bytes / bw, 4.0 * h * d / bw)
            else:  # per cached token: scores over rank + rope and values over rank for every head, its latent
                # vector read once; per sequence the absorbed query in and output out (ops.attn_mla_decode_work)
                rank, rope = MLA_DIMS["kv_lora_rank"], MLA_DIMS["qk_rope_head_dim"]
                self.terms = ((2.0 * h * (rank + rope) + 2.0 * h * rank) / peak, (rank + rope) * kv_bytes / bw,
                              h * (rank * 2 + rope) * 2.0 / bw)

    def reference(self, *xs: Any) -> Any:
        """The reference time (s) at free values `xs` (floats or arrays: the same operations either way)."""
        family = self.family
        if family == "gemm":
            m = xs[0]
            flops, fixed, per_row = self.terms
            return _larger(m * flops, fixed + m * per_row)
        if family == "attn_decode" or family == "mla_decode":  # batch sequences of ctx cached tokens
            b, ctx = xs
            flops, kv, q = self.terms
            total = b * ctx
            return _larger(total * flops, total * kv + b * q)
        if family == "attn_prefill" or family == "mla_prefill":  # batch prompts of seq tokens, no cached prefix:
            # b s (s + 1) / 2 pairs
            b, s = xs
            flops, kv, q = self.terms
            tokens = b * s
            return _larger(tokens * (s + 1.0) * 0.5 * flops, tokens * (q + kv))
        return reference_s(family, self.cat, {**self.base, **dict(zip(self.free, xs))}, self.peaks)

    def scalar1_s(self, x: float) -> float:
        """One free axis, a float (GEMM rows, MoE tokens, collective bytes; the simulator never asks these for
        arrays): plain Python, math's log and exp (within an ulp of numpy's)."""
        lo = self.lows[0]
        if x < lo:
            x = lo
        knots = self.knot_list[0]
        lx = math.log(x)
        lx = knots[0] if lx < knots[0] else (knots[-1] if lx > knots[-1] else lx)
        i = bisect.bisect_right(self.inner_list[0], lx)
        v = self.value_list[i] + (lx - knots[i]) * self.slope_list[i] if len(knots) > 1 else self.value_list[0]
        if self.family == "gemm":  # (`reference`, inlined: GEMMs are most of the calls)
            flops, fixed, per_row = self.terms
            a, b = x * flops, fixed + x * per_row
            return (a if a >= b else b) * math.exp(v)
        return float(self.reference(x)) * math.exp(v)

    def scalar2_s(self, x0: float, x1: float) -> float:
        """Two free axes, floats: `array_s`'s operations in the same order on Python floats (numpy's log and exp;
        along the second axis `np.interp`'s: its edges, knots and slope), so the result is bit for bit the same
        element of an array query."""
        x0 = x0 if x0 >= self.lows[0] else self.lows[0]
        x1 = x1 if x1 >= self.lows[1] else self.lows[1]
        i0, t0 = self._segment(0, x0)
        values = self.value_list
        lo_row = values[i0]
        hi_row = values[i0 + 1] if len(values) > 1 else lo_row
        knots = self.knot_list[1]
        lx = float(np.log(x1))
        if lx >= knots[-1]:
            j = len(knots) - 1
        elif lx <= knots[0]:
            j = 0
        else:
            j = bisect.bisect_right(knots, lx) - 1
        r = lo_row[j] + t0 * (hi_row[j] - lo_row[j])
        if j < len(knots) - 1 and lx > knots[j]:
            r1 = lo_row[j + 1] + t0 * (hi_row[j + 1] - lo_row[j + 1])
            r = (r1 - r) / (knots[j + 1] - knots[j]) * (lx - knots[j]) + r
        return float(self.reference(x0, x1)) * float(np.exp(r))

    def row_s(self, x0: float, x1: np.ndarray) -> np.ndarray:
        """Two free axes, a float and an array (a decode shape's batch and its run of contexts): `scalar2_s`'s
        operations, the second axis' for every element (`np.interp`: its edges, knots and slope), so each element is
        bit for bit `scalar2_s` of it."""
        x0 = x0 if x0 >= self.lows[0] else self.lows[0]
        i0, t0 = self._segment(0, x0)
        values = self.values
        lo_row = values[i0]
        hi_row = values[i0 + 1] if len(values) > 1 else lo_row
        c1 = np.maximum(x1, self.lows[1])
        v = np.interp(np.log(c1), self.knots[1], lo_row + t0 * (hi_row - lo_row))
        return self.reference(x0, c1) * np.exp(v)

    def _segment(self, axis: int, x: float) -> tuple[int, float]:
        """(segment, fraction along it) on axis 0; (segment, log distance from its lower knot) on axis 1."""
        knots = self.knot_list[axis]
        if len(knots) == 1:
            return 0, 0.0
        lx = float(np.log(x))
        lx = knots[0] if lx < knots[0] else (knots[-1] if lx > knots[-1] else lx)
        i = bisect.bisect_right(self.inner_list[axis], lx)
        d = lx - knots[i]
        return i, (d * self.inv_list[axis][i] if axis == 0 else d)

    def array_s(self, xs: list[Any]) -> Any:
        """Floats or arrays (broadcast), > 0: numpy, elementwise, the operations of `scalar2_s` (with one axis,
        `scalar1_s`'s form in numpy) on every element."""
        clamped = [np.maximum(np.asarray(x, dtype=np.float64), lo) for x, lo in zip(xs, self.lows)]
        segs: list[tuple[Any, Any]] = []
        for j, (x, k) in enumerate(zip(clamped, self.knots)):  # (each axis at its own shape: a float stays 0-d)
            if j == 1:  # (the second axis: np.interp below)
                break
            if len(k) == 1:
                segs.append((np.zeros(x.shape, dtype=np.intp), np.zeros(x.shape)))
                continue
            lx = np.minimum(np.maximum(np.log(x), k[0]), k[-1])  # (np.clip's values, faster)
            i = np.searchsorted(self.inner[j], lx, side="right")
            d = lx - k[i]
            segs.append((i, d * self.inv[j][i] if j == 0 else d))
        values = self.values
        if len(xs) == 1:
            i, d = segs[0]
            v = values[i] + d * self.slopes[i] if len(self.knots[0]) > 1 else values[i]
            return self.reference(*clamped) * np.exp(v)
        i0, t0 = segs[0]
        h0 = i0 + 1 if len(self.knots[0]) > 1 else i0
        k = self.knots[1]
        if i0.ndim == 0:  # (a float first axis, e.g. a decode shape's batch: along it once, over the knot row)
            lo_row, hi_row = values[int(i0)], values[int(h0)]
            v = np.interp(np.log(clamped[1]), k, lo_row + t0 * (hi_row - lo_row))
        else:  # (np.interp's arithmetic, element by element)
            lx = np.log(clamped[1])
            n = len(k)
            j = np.minimum(np.maximum(np.searchsorted(k, lx, side="right") - 1, 0), n - 1)
            r = values[i0, j] + t0 * (values[h0, j] - values[i0, j])
            j1 = np.minimum(j + 1, n - 1)
            r1 = values[i0, j1] + t0 * (values[h0, j1] - values[i0, j1])
            inside = (j < n - 1) & (lx > k[j])
            span = np.where(inside, k[j1] - k[j], 1.0)
            v = np.where(inside, (r1 - r) / span * (lx - k[j]) + r, r)
        return self.reference(*clamped) * np.exp(v)


class Curve:
    """One op with every argument but its free ones fixed: `curve(*free)` in seconds (floats, or arrays for any
    free argument), 0 where there is no work. GEMM tables split by M alignment pick their kind per call."""

    __slots__ = ("slices", "free", "one")

    def __init__(self, slices: dict[str, _Slice] | None, free: int) -> None:
        self.slices = slices  # {"": slice} or {aligned16: ..., unaligned16: ...}; None: no work at these arguments
        self.free = free
        self.one = None if slices is None else slices.get("")  # (not split by alignment)

    def __call__(self, *xs: Any) -> Any:
        slices = self.slices
        sl = self.one
        if len(xs) == 1 and sl is not None and not isinstance(xs[0], np.ndarray):  # (the common case, first)
            x = float(xs[0])
            return sl.scalar1_s(x) if x > 0 else 0.0
        scalar = True
        for x in xs:
            if isinstance(x, np.ndarray) and x.ndim:
                scalar = False
        if slices is None:
            return 0.0 if scalar else np.zeros(np.broadcast(*xs).shape)
        if sl is None:  # (a split GEMM table: m is a float, one alignment kind; grid.gemm_variant)
            sl = slices[ALIGNED if round(float(xs[0])) % ALIGN == 0 else UNALIGNED]
        if scalar:
            if self.free == 1:
                x = float(xs[0])
                return sl.scalar1_s(x) if x > 0 else 0.0
            x0, x1 = float(xs[0]), float(xs[1])
            return sl.scalar2_s(x0, x1) if x0 > 0 and x1 > 0 else 0.0
        if self.free == 2 and not (isinstance(xs[0], np.ndarray) and xs[0].ndim):  # (a float and an array)
            x0, x1 = float(xs[0]), np.asarray(xs[1], dtype=np.float64)
            if not x0 > 0:
                return np.zeros(x1.shape)
            if float(x1.min()) > 0:
                return sl.row_s(x0, x1)
            live1 = x1 > 0  # (a run's window may start at context 0: no work there)
            return np.where(live1, sl.row_s(x0, np.where(live1, x1, 1.0)), 0.0)
        arrays = [np.asarray(x, dtype=np.float64) for x in xs]
        if all(float(a.min()) > 0 for a in arrays):
            return sl.array_s(arrays)
        live = np.ones(np.broadcast(*arrays).shape, dtype=bool)
        for a in arrays:
            live &= a > 0
        if not live.any():
            return np.zeros(live.shape)
        return np.where(live, sl.array_s([np.where(live, a, 1.0) for a in arrays]), 0.0)


class GridLookup:
    """`latency_s(op, **shape)` and `curve(op, **fixed)` of a `GridModel` through kept slices (module doc);
    `covers` as the model's."""

    def __init__(self, model: GridModel) -> None:
        self.model = model
        self._curves: dict[tuple, Curve] = {}
        self._covers: dict[tuple, bool] = {}

    def covers(self, op: str, **cat: Any) -> bool:
        key = (op, tuple(sorted(cat.items())))
        hit = self._covers.get(key)
        if hit is None:
            hit = self._covers[key] = self.model.covers(op, **cat)
        return hit

    def gpu_counts(self, op: str, **cat: Any) -> list[int]:
        """The GPU counts a collective (or DeepEP: its EP ranks) was measured on at these exact-match keys (empty:
        none)."""
        s = {**_SIGNATURES[op][1], **cat}
        try:
            family, key = self.model._route(op, s)
        except KeyError:
            return []
        g = self.model.grid(family)
        if g is None or key not in g.groups:
            return []
        j = FAMILIES[family].combo.index("gpus")
        return sorted({int(round(float(np.exp(c[j])))) for c in g.groups[key][0]})

    def moe_distributions(self, dtype: str) -> list[str]:
        """The routing distributions the MoE block was measured under in format `dtype` (balanced,
        power_law_<alpha>)."""
        g = self.model.grid("moe")
        return [] if g is None else sorted(d for f, d in g.groups if f == dtype)

    def moe_tp_measured(self, dtype: str, distribution: str) -> bool:
        """Whether the MoE block in format `dtype` under `distribution` was measured with its experts split by
        tensor parallelism (a combo with `tp` > 1, of any shape)."""
        g = self.model.grid("moe")
        group = None if g is None else g.groups.get((dtype, distribution))
        if group is None:
            return False
        return bool((group[0][:, FAMILIES["moe"].combo.index("tp")] > 0.0).any())  # (combos are logged)

    def latency_s(self, op: str, **shape: Any) -> Any:
        """Seconds of `op` at `shape` (`GridModel.latency_s`'s arguments and units): a float, or an array when a
        free argument (`FREE`) is an array; 0 where there is no work. Raises as `GridModel.latency_s` does."""
        free = FREE.get(op)
        if free is None:
            return self.model.latency_s(op, **shape)  # (raises its KeyError)
        xs = [shape.pop(c, None) for c in free]
        if any(x is None for x in xs):
            return self.model.latency_s(op, **shape)  # (raises its TypeError)
        return self.curve(op, **shape)(*xs)

    def curve(self, op: str, **fixed: Any) -> Curve:
        """The op with `fixed` (every argument but `FREE[op]`) fixed, kept: checked and routed as
        `GridModel.latency_s` does (its errors for wrong arguments or unmeasured keys)."""
        key = (op, *fixed.items())  # (a call site passes its arguments in one order: one curve per site and shape)
        c = self._curves.get(key)
        if c is None:
            c = self._curves[key] = self._build(op, fixed)
        return c

    def _build(self, op: str, fixed: dict[str, Any]) -> Curve:
        free = FREE.get(op)
        if free is None:
            raise KeyError(f"unknown op {op!r}; valid: {', '.join(FREE)}")
        probe = {**fixed, **{c: 1.0 for c in free}}
        required, optional = _SIGNATURES[op]
        missing = [a for a in required if a not in probe]
        unknown = [a for a in probe if a not in required and a not in optional]
        if missing or unknown:
            self.model.latency_s(op, **probe)  # (raises its TypeError)
        s = {**optional, **probe}
        family, key = self.model._route(op, s)
        g = self.model.grid(family)
        if g is None or (key not in g.groups and (key[0], ALIGNED) not in g.groups):
            self.model.latency_s(op, **probe)  # (raises its KeyError)
        assert g is not None
        spec = FAMILIES[family]
        if family in ("custom_allreduce", "nccl") and float(s["gpus"]) <= 1:  # (one GPU moves nothing)
            return Curve(None, len(free))
        dense = {c: float(s[c]) for c in spec.dense if c not in free}
        if any(not v > 0 for v in dense.values()):
            return Curve(None, len(free))
        combo = tuple(float(s[c]) for c in spec.combo)
        if key in g.groups:
            return Curve({"": _Slice(self.model, family, key, combo, dense, free)}, len(free))
        return Curve({v: _Slice(self.model, family, (key[0], v), combo, dense, free) for v in (ALIGNED, UNALIGNED)},
                     len(free))


def grid_lookup(model: GridModel) -> GridLookup:
    """`model`'s `GridLookup`, kept with it (its slices serve every cost model priced from this profile in the
    process, as the family grids do)."""
    if model._lookup is None:
        model._lookup = GridLookup(model)
    return model._lookup
