"""`GridModel`: a profile's measured shape grids, priced by op name: the interface a pricer calls.

    model.latency_s(op, **shape) -> seconds (a float; an array when a dense argument is an array)

| op | shape arguments (units) | family (grid) |
|---|---|---|
| `gemm` | dtype, m, n, k (rows, output columns, reduction) | gemm |
| `attn_prefill` | batch, seq (new tokens per sequence, no cached prefix), heads, kv_heads, head_dim (per device); dtype = KV-cache format (bf16, fp8), compute = attention math format (bf16; fp8 where measured) | attn_prefill |
| `attn_decode` | batch (sequences), ctx (cached tokens per sequence, the new one included), heads, kv_heads, head_dim, dtype, compute | attn_decode |
| `moe_gemm` | dtype, tokens (routed by the whole EP group: each EP rank computes about tokens x topk / ep rows), hidden, inter (the expert's full intermediate size; `tp` splits it), topk, experts (all of the layer's), tp, ep, distribution (balanced, power_law_1.01, power_law_1.2) | moe: the whole routed-expert block (up/gate GEMM, activation, down GEMM) |
| `allreduce` | bytes, gpus, impl (custom: the engine's custom all-reduce captured in a CUDA graph; custom_eager; nccl), dtype | custom_allreduce or nccl |
| `all_gather`, `reduce_scatter`, `all_to_all` | bytes (the whole buffer: all-gather's output, reduce-scatter's input, all-to-all's per-rank send buffer), gpus, dtype | nccl |
| `attn_mla_prefill` | batch, seq (new tokens per sequence, no cached prefix), heads (per device); dtype = KV-cache format, compute; DeepSeek-V3's MLA dimensions (`names.MLA_DIMS`) | mla_prefill: the attention kernel alone, no projection |
| `attn_mla_decode` | batch, ctx (cached tokens per sequence, the new one included), heads (per device; draft tokens verified count as heads), dtype, compute | mla_decode: the kernel alone, weights absorbed |
| `mla_bmm_pre`, `mla_bmm_post` | tokens (decoding query tokens), heads (per device), dtype | mla_bmm: MLA decode's absorbed per-head products, batched over heads |
| `gdn_conv_prefill`, `gdn_chunk_prefill` | batch (sequences), seq (new tokens per sequence), heads (value heads per device), kv_heads (key heads), head_dim | gdn_prefill: Gated DeltaNet's causal convolution and chunked delta rule, the kernels alone |
| `gdn_conv_decode`, `gdn_recurrent_decode` | batch (sequences, one token each), heads, kv_heads, head_dim | gdn_decode: the convolution and the delta rule through the per-sequence state |
| `dsa_module_prefill` | batch, seq (new tokens per prompt, no cached prefix), heads (per device), variant (the model: `names.DSA_MODELS`); dtype = KV-cache format, compute = the projections' format (bf16, fp8_block) | dsa_prefill: the whole sparse-attention module (projections, indexer, top-k, sparse MLA kernel, o_proj) |
| `dsa_module_decode` | batch (sequences), ctx (cached tokens per sequence), heads, variant, dtype, compute | dsa_decode: the same module for one token per sequence |
| `deepep_dispatch`, `deepep_combine` | tokens (per EP rank before dispatch), hidden, topk, experts (the layer's), gpus (EP ranks, 8 per node), kernel (normal, low_latency), dtype (dispatch fp8_block, combine bf16: what the tables moved) | deepep_normal or deepep_ll |

`prefill_shape`, `decode_shape` turn the simulator's batch sums into those shapes. Grids are built on first use and
kept: per family, then per format (exact-match key) and per combo (`grid.py`). No file is read here:
`calibrate.profile.load_profile` hands over the columns. A simulator reads them through `lookup.GridLookup`.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from calibrate.aic.grid import ALIGNED, FAMILIES, UNALIGNED, FamilyGrid, Peaks, gemm_variant

ALLREDUCE_IMPLS = ("custom", "custom_eager", "nccl")
_SIGNATURES: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "gemm": (("dtype", "m", "n", "k"), {}),
    "attn_prefill": (("batch", "seq", "heads", "kv_heads", "head_dim"), {"dtype": "bf16", "compute": "bf16"}),
    "attn_decode": (("batch", "ctx", "heads", "kv_heads", "head_dim"), {"dtype": "bf16", "compute": "bf16"}),
    "moe_gemm": (("dtype", "tokens", "hidden", "inter", "topk", "experts"),
                 {"tp": 1, "ep": 1, "distribution": "balanced"}),
    "allreduce": (("bytes", "gpus"), {"impl": "custom", "dtype": "bf16"}),
    "all_gather": (("bytes", "gpus"), {"dtype": "fp16"}),
    "reduce_scatter": (("bytes", "gpus"), {"dtype": "fp16"}),
    "all_to_all": (("bytes", "gpus"), {"dtype": "fp16"}),
    "attn_mla_prefill": (("batch", "seq", "heads"), {"dtype": "bf16", "compute": "bf16"}),
    "attn_mla_decode": (("batch", "ctx", "heads"), {"dtype": "bf16", "compute": "bf16"}),
    "deepep_dispatch": (("tokens", "hidden", "topk", "experts", "gpus"), {"kernel": "normal", "dtype": "fp8_block"}),
    "deepep_combine": (("tokens", "hidden", "topk", "experts", "gpus"), {"kernel": "normal", "dtype": "bf16"}),
    "mla_bmm_pre": (("tokens", "heads"), {"dtype": "bf16"}),
    "mla_bmm_post": (("tokens", "heads"), {"dtype": "bf16"}),
    "gdn_conv_prefill": (("batch", "seq", "heads", "kv_heads", "head_dim"), {"dtype": "bf16"}),
    "gdn_chunk_prefill": (("batch", "seq", "heads", "kv_heads", "head_dim"), {"dtype": "bf16"}),
    "gdn_conv_decode": (("batch", "heads", "kv_heads", "head_dim"), {"dtype": "bf16"}),
    "gdn_recurrent_decode": (("batch", "heads", "kv_heads", "head_dim"), {"dtype": "bf16"}),
    "dsa_module_prefill": (("batch", "seq", "heads", "variant"), {"dtype": "bf16", "compute": "bf16"}),
    "dsa_module_decode": (("batch", "ctx", "heads", "variant"), {"dtype": "bf16", "compute": "bf16"}),
}
GDN_OP_FAMILY = {"gdn_conv_prefill": "gdn_prefill", "gdn_chunk_prefill": "gdn_prefill",
                 "gdn_conv_decode": "gdn_decode", "gdn_recurrent_decode": "gdn_decode"}
DSA_OP_FAMILY = {"dsa_module_prefill": "dsa_prefill", "dsa_module_decode": "dsa_decode"}
DEEPEP_FAMILY = {"normal": "deepep_normal", "low_latency": "deepep_ll"}
# NCCL was measured in fp16 ("half") and int8; a bf16 collective moves the same bytes (assumption: same speed).
_NCCL_DTYPE = {"bf16": "fp16"}


def prefill_shape(prefill_tokens: float, q_sq: float, q_ctx: float) -> tuple[float, float]:
    """(batch, seq) of equal prompts with the same tokens and attended pairs as a batch of prefill chunks
    (`sim.core.cost.layers.Work`: prefill_tokens, prefill_q_sq = sum q (q+1)/2, prefill_q_ctx = sum q c): seq
    from pairs per token, pairs / tokens = (seq + 1) / 2, batch = tokens / seq. NOTE: the grid has no cached
    prefix; a chunk after c cached tokens is priced as a longer prompt with the same pairs."""
    if prefill_tokens <= 0:
        return 0.0, 0.0
    seq = max(1.0, 2.0 * (q_sq + q_ctx) / prefill_tokens - 1.0)
    return prefill_tokens / seq, seq


def decode_shape(seqs: float, ctx_tokens_sum: Any) -> tuple[float, Any]:
    """(batch, ctx) of `seqs` decoding sequences holding `ctx_tokens_sum` cached tokens in all (a float or an
    array over a run of decode steps): the mean context per sequence."""
    return seqs, ctx_tokens_sum / max(seqs, 1e-12)


class GridModel:
    """The measured grids of one profile: `latency_s(op, **shape)` in seconds."""

    def __init__(self, columns: dict[str, np.ndarray], peaks: Peaks, digest: str = "") -> None:
        self.peaks, self.digest = peaks, digest
        fam = np.asarray(columns["family"])
        self._rows = {f: np.flatnonzero(fam == f) for f in FAMILIES if (fam == f).any()}
        self._columns = columns
        self._grids: dict[str, FamilyGrid] = {}
        self._lookup: Any = None   # its `calibrate.aic.lookup.GridLookup`, made on first use (`grid_lookup`)

    def __repr__(self) -> str:  # (the simulator keys kept cost models on the profile's repr: content, not size)
        return f"GridModel(families={sorted(self._rows)}, sha256={self.digest})"

    @property
    def families(self) -> tuple[str, ...]:
        return tuple(sorted(self._rows))

    def grid(self, family: str) -> FamilyGrid | None:
        g = self._grids.get(family)
        if g is None and family in self._rows:
            r: Any = self._rows[family]
            if len(r) and r[-1] - r[0] + 1 == len(r):  # (a profile is written sorted by family: views, no copies)
                r = slice(int(r[0]), int(r[-1]) + 1)
            g = self._grids[family] = FamilyGrid(family, {k: v[r] for k, v in self._columns.items()}, self.peaks)
        return g

    def covers(self, op: str, **cat: Any) -> bool:
        """Whether `latency_s(op, ...)` with these exact-match keys (dtype, compute, distribution, impl) is priced
        from measurements (else it raises KeyError): what a pricer asks before falling back to its own form."""
        try:
            family, key = self._route(op, {**_SIGNATURES[op][1], **cat})
        except KeyError:
            return False
        g = self.grid(family)
        if g is not None and family == "gemm":
            return key in g.groups or (key[0], ALIGNED) in g.groups
        return g is not None and key in g.groups

    def latency_s(self, op: str, **shape: Any) -> Any:
        """Seconds of one `op` at `shape` (module table: names and units); 0 for no work. Raises KeyError for an
        op, format or variant the profile did not measure, TypeError for missing or unknown arguments."""
        if op not in _SIGNATURES:
            raise KeyError(f"unknown op {op!r}; valid: {', '.join(_SIGNATURES)}")
        required, optional = _SIGNATURES[op]
        missing = [a for a in required if a not in shape]
        unknown = [a for a in shape if a not in required and a not in optional]
        if missing or unknown:
            raise TypeError(f"latency_s({op!r}): missing {missing}, unknown {unknown}; takes {list(required)} "
                            f"and optionally {sorted(optional)}")
        s = {**optional, **shape}
        family, key = self._route(op, s)
        g = self.grid(family)
        if g is None:
            raise KeyError(f"{op}: the profile has no {family} measurements (has {', '.join(self.families)})")
        spec = FAMILIES[family]
        if family in ("custom_allreduce", "nccl") and float(s["gpus"]) <= 1:  # (one GPU moves nothing)
            return 0.0 if np.ndim(s["bytes"]) == 0 else np.zeros(np.shape(s["bytes"]))
        combo = tuple(float(s[c]) for c in spec.combo)
        dense = tuple(s[c] for c in spec.dense)
        kinds = None  # (an array of M alignment kinds when a split GEMM table is asked for an array of m)
        if family == "gemm" and key not in g.groups and (key[0], ALIGNED) in g.groups:
            variant = gemm_variant(s["m"])
            if np.ndim(variant) == 0:
                key = (key[0], variant)
            else:
                kinds = variant
        live = np.ones(np.broadcast(*dense).shape, dtype=bool)
        for x in dense:
            live &= np.asarray(x) > 0
        if not live.any():
            return 0.0 if live.ndim == 0 else np.zeros(live.shape)
        safe = tuple(np.where(live, x, 1.0) if live.ndim else x for x in dense)
        if kinds is not None:
            t = np.where(kinds == ALIGNED, g.latency_s((key[0], ALIGNED), combo, safe),
                         g.latency_s((key[0], UNALIGNED), combo, safe))
        else:
            t = g.latency_s(key, combo, safe)
        if live.ndim == 0:
            return t
        return np.where(live, t, 0.0)

    def _route(self, op: str, s: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
        """(family, exact-match key) of an op call."""
        if op == "allreduce":
            impl = s.get("impl", "custom")
            if impl not in ALLREDUCE_IMPLS:
                raise KeyError(f"allreduce impl {impl!r}; valid: {', '.join(ALLREDUCE_IMPLS)}")
            if impl == "nccl":
                return "nccl", ("allreduce", _NCCL_DTYPE.get(s["dtype"], s["dtype"]))
            return "custom_allreduce", (s["dtype"], "eager" if impl == "custom_eager" else "graph")
        if op in ("all_gather", "reduce_scatter", "all_to_all"):
            return "nccl", (op, _NCCL_DTYPE.get(s["dtype"], s["dtype"]))
        if op == "moe_gemm":
            return "moe", (s["dtype"], s["distribution"])
        if op in ("mla_bmm_pre", "mla_bmm_post"):
            return "mla_bmm", (op, s["dtype"])
        if op in GDN_OP_FAMILY:
            return GDN_OP_FAMILY[op], (op, s["dtype"])
        if op in DSA_OP_FAMILY:
            return DSA_OP_FAMILY[op], (s["dtype"], s["compute"], s["variant"])
        if op in ("attn_mla_prefill", "attn_mla_decode"):
            return op.replace("attn_", ""), (s["dtype"], s["compute"])
        if op in ("deepep_dispatch", "deepep_combine"):
            kernel = s.get("kernel", "normal")
            if kernel not in DEEPEP_FAMILY:
                raise KeyError(f"DeepEP kernel {kernel!r}; valid: {', '.join(DEEPEP_FAMILY)}")
            return DEEPEP_FAMILY[kernel], (op, s["dtype"])
        if op in ("attn_prefill", "attn_decode"):
            return op, (s["dtype"], s["compute"])
        return "gemm", (s["dtype"], "")
