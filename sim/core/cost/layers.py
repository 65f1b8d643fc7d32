"""One layer's ops on one device, priced: attention (GQA or MLA, dense or sparse), dense MLP, MoE, elementwise.

`Work` is what the busiest device computes for one micro-batch (shares of the scheduled batch, so floats); the
decode context sums come separately as an array so that a run of decode steps is priced in one call with the
same arithmetic as a single step (`sim.core.cost.roofline`). A `LayerCost` keeps compute by part, the communication
that may overlap compute (TP all-reduce, EP dispatch and combine) and the host fetches that may not.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from calibrate import ops
from calibrate.aic.names import MLA_DIMS, dsa_variant
from inferplan.specs import ModelSpec
from sim.core.cost import experts as ex
from sim.core.cost.comm import Links
from inferplan.config.deployment import Deployment
from sim.core.cost.host import ELEMENTWISE_KERNELS
from sim.core.cost.layout import Layout
from sim.core.cost.linear_attention import LinearAttentionPricer
from sim.core.cost.pricer import OpPricer
from sim.core.cost.tables import StepCache
from sim.core.cost.weights import expert_bytes_per_device, kv_elem_bytes

COMPUTE_PARTS: tuple[str, ...] = ("attention", "dense_gemm", "moe_gemm", "elementwise")


class Work(NamedTuple):
    """One device's share of one micro-batch (a NamedTuple: made and hashed for every priced iteration)."""

    tokens: float              # rows through projections and dense MLP: prefill tokens + decode query tokens
    prefill_tokens: float
    prefill_q_ctx: float       # sum of q x c over prefill chunks (see BatchShape)
    prefill_q_sq: float        # sum of q (q + 1) / 2
    prefill_kv_tokens: float
    decode_seqs: float
    queries: int               # query tokens per decoding sequence: 1, or 1 + drafts when verifying MTP drafts
    moe_tokens: float          # tokens routed by the whole EP group (all DP ranks) in this micro-batch


def work(fields: tuple) -> Work:
    """A Work from its eight fields in order."""
    return tuple.__new__(Work, fields)


class LayerCost:
    """One layer's priced parts: compute by part, overlappable communication, host fetches, kernel launches."""

    __slots__ = ("compute", "comm_s", "fetch_s", "launches")

    def __init__(self, compute: dict, comm_s: float, fetch_s: float, launches: int) -> None:
        self.compute = compute     # part -> seconds (float, or array over decode steps for attention)
        self.comm_s = comm_s       # overlappable communication
        self.fetch_s = fetch_s     # host fetches of cold experts (never overlapped)
        self.launches = launches

    def compute_s(self):
        return sum(self.compute[p] for p in COMPUTE_PARTS)


class LayerPricer:
    def __init__(self, m: ModelSpec, dep: Deployment, lay: Layout, pricer: OpPricer, links: Links,
                 kv_dtype: str, cache: StepCache) -> None:
        self.m, self.dep, self.lay, self.pricer, self.links = m, dep, lay, pricer, links
        self.fmt = dep.weights
        self.kv_bytes = kv_elem_bytes(kv_dtype)
        self.kv_op_dtype = "fp8" if kv_dtype in ("fp8", "fp8_block") else kv_dtype
        self.heads = m.num_heads / lay.tp
        self.gate = 2 if m.ffn_kind == "gated" else 1
        self.cache = cache  # the cost model's one step cache: a layer's context-free part is kept there by work
        # Sliding-window layers attend at most `window` keys per query; a layer's attention is priced as the mean
        # over the model's layers of full and windowed attention (`window_share` of them windowed), which sums
        # to the exact total over a stage holding both kinds in the model's proportion. Attention sinks (one
        # learned logit per head in the softmax's denominator) add one term per head and query to a sum over
        # the keys: no op of their own, negligible next to the keys' products.
        self.window = float(m.sliding_window_tokens)
        self.window_share = m.sliding_layer_share
        # Linear-attention (Gated DeltaNet) layers: the same mean, `linear_share` of the layers priced as their
        # projections and kernels (`sim.core.cost.linear_attention`).
        self.linear_share = m.linear_layer_share
        la = m.linear_attention
        self.linear: LinearAttentionPricer | None = None if la is None else LinearAttentionPricer(la, lay.tp, pricer)
        e = m.moe
        if e is not None:
            self.base_imbalance = ex.base_imbalance(dep.experts, e.num_experts, lay.ep)
            self.cold_share = ex.cold_traffic_share(dep.experts, e.num_experts, lay.cold_experts)
            self.expert_bytes = expert_bytes_per_device(m, dep, lay)
        # Under a grid profile (measured per-op latencies), which of this layer's ops its tables price: GQA
        # attention in the KV format, dense MLA attention of DeepSeek-V3's dimensions in the KV format (recorded
        # when first priced: a prefill pool runs no decode attention), the routed experts at the routing
        # distribution the deployment states (`moe_distribution`); the rest falls back, with its reason.
        self.gqa_grid = False
        self.moe_grid = False
        self.moe_distribution = "balanced"
        self.moe_tp_as_ep = False
        self._mla_reason = ""
        self._mla_absent = False
        self._mla_noted = ""  # the MLA attentions (prefill, decode) already recorded as measured or not
        self.bmm_grid = False  # MLA decode's absorbed products from their own table (else as GEMMs)
        # A sparse-attention (DSA) model's whole attention module from its measured table (projections, indexer,
        # top-k, sparse kernel, o_proj: `calibrate.aic.names.DSA_FAMILIES`): (model, KV format, projections'
        # format) where the grid measured this model's module, else None (its ops priced one by one)
        self.dsa: tuple[str, str, str] | None = None
        if pricer.grid is not None:
            if m.attention_kind == "gqa":
                self.gqa_grid = (pricer.measures("attn_prefill", self.kv_op_dtype, dtype=self.kv_op_dtype)
                                 and pricer.measures("attn_decode", self.kv_op_dtype, dtype=self.kv_op_dtype))
            else:
                self._mla_reason, self._mla_absent = self._mla_coverage()
                self.bmm_grid = self._bmm_coverage()
            s = dep.sparse_attention
            if s is not None:
                self.dsa = self._dsa_coverage()
                if self.dsa is None:
                    for op in ("attn_prefill", "attn_decode"):
                        pricer.fall_back(op, s.indexer_dtype, "sparse-attention indexer: not in the tables")
            if e is not None:
                self.moe_distribution = ex.grid_distribution(dep.experts, pricer.grid.moe_distributions(
                    self.fmt["experts"]))
                self.moe_grid = pricer.measures("moe_gemm", self.fmt["experts"], dtype=self.fmt["experts"],
                                                distribution=self.moe_distribution)
                # Experts split by TP g where the table measured no TP split of this format (TensorRT-LLM's
                # MXFP4 block on Hopper: EP splits only) are priced as its EP g block at the same tokens: where
                # the database measured both (every other format, engine and GPU), the TP g block takes the EP g
                # block's time (median ratio 0.88-0.99 at g = 2-8: `python -m calibrate.aic.moe_splits`), while
                # the nearest measured combo's efficiency over our own work formula (the TP 1 block's) would
                # scale the kernels' fixed floor down by g.
                self.moe_tp_as_ep = (self.moe_grid and lay.moe_tp > 1
                                     and not pricer.grid.moe_tp_measured(self.fmt["experts"], self.moe_distribution))

    def _dsa_coverage(self) -> tuple[str, str, str] | None:
        """(model, KV format, projections' format) of the measured DSA module that is this layer's attention (the
        table's model has this model's config facts and the grid measured both phases in these formats), else
        None."""
        m, s = self.m, self.dep.sparse_attention
        assert s is not None
        variant = dsa_variant({"hidden_size": m.hidden_size, "q_lora_rank": m.q_lora_rank, **self._mla_dims(),
                               "index_n_heads": s.indexer_heads, "index_head_dim": s.indexer_head_dim,
                               "index_topk": s.top_k_tokens})
        if variant is None or m.attention_kind != "mla":
            return None
        kv, proj = self.kv_op_dtype, self.fmt["attention"]
        if all(self.pricer.measures(op, kv, dtype=kv, compute=proj, variant=variant)
               for op in ("dsa_module_prefill", "dsa_module_decode")):
            return variant, kv, proj
        return None

    def _mla_dims(self) -> dict[str, int]:
        m = self.m
        return {"kv_lora_rank": m.kv_lora_rank, "qk_rope_head_dim": m.qk_rope_head_dim,
                "qk_nope_head_dim": m.qk_nope_head_dim, "v_head_dim": m.v_head_dim}

    def _mla_coverage(self) -> tuple[str, bool]:
        """("", _) when the grid prices this model's MLA attention, else (why not, whether the database measures
        no such attention at all)."""
        grid, dims = self.pricer.grid, self._mla_dims()
        if dims != MLA_DIMS:
            return (f"MLA dimensions {dims}: the tables measure DeepSeek-V3's ({MLA_DIMS}) only", True)
        if self.dep.sparse_attention is not None:
            return ("sparse MLA attention (top-k keys): the tables measured here hold dense MLA", False)
        lack = [f for f in ("mla_prefill", "mla_decode") if not grid.covers("attn_" + f, dtype=self.kv_op_dtype)]
        if not lack:
            return "", False
        absent = not any(self.pricer.in_database(f) for f in lack)
        return (f"no {' or '.join(lack)} measurements of a {self.kv_op_dtype} KV cache in the grid profile"
                + (" (the database has none for this GPU)" if absent else ""), absent)

    def _bmm_coverage(self) -> bool:
        """Whether the grid prices MLA decode's absorbed products from their table (DeepSeek-V3's dimensions, bf16
        as the simulator runs them); recorded when first priced."""
        grid = self.pricer.grid
        return self._mla_dims() == MLA_DIMS and grid.covers("mla_bmm_pre", dtype="bf16") and grid.covers("mla_bmm_post",
                                                                                              dtype="bf16")

    def _note_mla(self, phase: str) -> None:
        """Record, once per phase, how this layer's MLA attention is priced (measured, or the fallback and why)."""
        if phase in self._mla_noted or self.pricer.grid is None:
            return
        self._mla_noted += phase
        if phase == "bmm":
            self.pricer.measured.add(("mla_bmm", "bf16"))
            return
        op, label = ("attn_mla_prefill", self.kv_op_dtype) if phase == "prefill" else ("attn_mla_decode",
                                                                                          self.kv_op_dtype)
        if not self._mla_reason:
            self.pricer.measured.add((op, label))
        elif phase == "prefill":
            self.pricer.fall_back("attn_prefill", "bf16", self._mla_reason, self._mla_absent)
        else:
            self.pricer.fall_back("attn_mla_decode", self.kv_op_dtype, self._mla_reason, self._mla_absent)

    # -- single ops -------------------------------------------------------------------------------------------
    def gemm(self, rows: float, n: float, k: float, dtype: str) -> float:
        """A GEMM's seconds, kept by its arguments in the step cache: shapes met for the first time mostly share
        their token count, hence their projections and MLP, with shapes met before."""
        if rows <= 0:
            return 0.0
        key = (rows, n, k, dtype)
        kept = self.cache.ops
        t = kept.get(key)
        if t is None:
            t = self.pricer.gemm_s("gemm", dtype, rows, n, k, *ops.gemm_work(rows, n, k, dtype))
            self.cache.remember(kept, key, t)
        return t

    def lm_head(self, rows: float) -> float:
        return self.gemm(rows, self.m.vocab_size / self.lay.tp, self.m.hidden_size, self.fmt["lm_head"])

    def eh_proj(self, tokens: float) -> float:
        """The MTP module's projection of [hidden; embedding] (2H) back to H."""
        H = self.m.hidden_size
        return self.gemm(tokens, H / self.lay.tp, 2 * H, self.fmt["attention"])

    # -- attention --------------------------------------------------------------------------------------------
    def attention(self, w: Work) -> tuple[float, int]:
        """(projection GEMM seconds, launches) of one layer's attention; the prefill attention itself is
        `prefill_attention` and decode attention, the only part that changes along a run of decode steps,
        `decode_attention`."""
        m, f, T, h = self.m, self.fmt["attention"], w.tokens, self.heads
        launches = 0
        if m.attention_kind == "gqa":
            kv, d = max(1.0, m.num_kv_heads / self.lay.tp), m.head_dim
            q = 2 * h if m.attention_output_gate else h  # (queries and their output gates)
            proj = self.gemm(T, (q + 2 * kv) * d, m.hidden_size, f) + self.gemm(T, m.hidden_size, h * d, f)
            if self.linear_share > 0.0:
                proj = (1.0 - self.linear_share) * proj + self.linear_share * self._linear_projections(T, f)
        else:
            rank, rope, nope, v = m.kv_lora_rank, m.qk_rope_head_dim, m.qk_nope_head_dim, m.v_head_dim
            module = self.dsa is not None  # (the measured module holds the projections: priced with it)
            proj = 0.0
            if not module:
                q_proj = (self.gemm(T, m.q_lora_rank, m.hidden_size, f)
                          + self.gemm(T, h * (nope + rope), m.q_lora_rank, f)
                          if m.q_lora_rank else self.gemm(T, h * (nope + rope), m.hidden_size, f))
                proj = q_proj + self.gemm(T, rank + rope, m.hidden_size, f) + self.gemm(T, m.hidden_size, h * v, f)
            launches += 1 if m.q_lora_rank else 0
            if w.prefill_tokens:  # prefill up-projects the latent cache to per-head K and V (not absorbed)
                if not module:
                    proj += self.gemm(w.prefill_kv_tokens, h * (nope + v), rank, f)
                launches += 1
            if w.decode_seqs:  # decode absorbs W_UK into the query and W_UV into the output: per-head products
                rows = w.decode_seqs * w.queries
                if self.bmm_grid and not module:  # (measured as the batched products they are)
                    self._note_mla("bmm")
                    hi = int(round(h))
                    proj += (self.pricer.mla_bmm_s("mla_bmm_pre", "bf16", rows, hi)
                             + self.pricer.mla_bmm_s("mla_bmm_post", "bf16", rows, hi))
                elif not module:
                    proj += self.gemm(rows, h * rank, nope, "bf16") + self.gemm(rows, h * v, rank, "bf16")
                launches += 2
        launches += 3 if m.attention_kind == "mla" else 2
        if w.prefill_tokens:
            launches += 1 + (self.dep.sparse_attention is not None)
        if w.decode_seqs:
            launches += 1 + (self.dep.sparse_attention is not None)
        return proj, launches

    def _linear_projections(self, T: float, f: str) -> float:
        """One Gated DeltaNet layer's GEMMs on one device: the input projection to queries, keys, values, output
        gate and the two per-head gates, and the output projection."""
        la = self.m.linear_attention
        assert la is not None
        tp, H = self.lay.tp, self.m.hidden_size
        v = la.num_value_heads * la.value_head_dim
        width = (2 * la.num_key_heads * la.key_head_dim + 2 * v + 2 * la.num_value_heads) / tp
        return self.gemm(T, width, H, f) + self.gemm(T, H, v / tp, f)

    def prefill_attention(self, w: Work) -> float:
        """Prefill attention seconds of one layer (0 without prefill tokens), kept by the work's prefill fields
        in the step cache: prompts of the same length share it whatever decodes run beside them."""
        if not w.prefill_tokens:
            return 0.0
        key = ("attn_prefill", w.prefill_tokens, w.prefill_q_ctx, w.prefill_q_sq, w.prefill_kv_tokens)
        kept = self.cache.ops
        t = kept.get(key)
        if t is None:
            m, h = self.m, self.heads
            hi = int(round(h))
            if m.attention_kind == "gqa":
                t = self._prefill_attention(w, hi, int(round(max(1.0, m.num_kv_heads / self.lay.tp))), m.head_dim,
                                            self.kv_bytes)
            elif self.dsa is not None:
                t = self.pricer.dsa_module_s("dsa_module_prefill", self.dsa[1], self.dsa[2], self.dsa[0], hi,
                                             w.prefill_tokens, w.prefill_q_sq, w.prefill_q_ctx)
            elif self.pricer.grid is not None and not self._mla_reason:
                self._note_mla("prefill")
                t = self.pricer.mla_prefill_s(self.kv_op_dtype, w.prefill_tokens, w.prefill_q_sq, w.prefill_q_ctx,
                                              hi)
            else:
                self._note_mla("prefill")
                t = self._prefill_attention(w, hi, hi, (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim) // 2,
                                            2.0)
            if self.window_share > 0.0:
                full = t
                t = (1.0 - self.window_share) * full + self.window_share * self._windowed_prefill(w, hi)
            if self.linear is not None:
                t = ((1.0 - self.linear_share) * t
                     + self.linear_share * self.linear.prefill_s(w.prefill_tokens, w.prefill_q_sq))
            self.cache.remember(kept, key, t)
        return t

    def _windowed_prefill(self, w: Work, heads: int) -> float:
        """Prefill attention of one sliding-window layer: each query attends at most `window` keys, so the
        attended pairs are at most prefill tokens x window (exact when every query has `window` earlier
        positions; a chunk starting at position 0 has window (window - 1) / 2 fewer), and the keys read at most
        the new tokens + `window`. The grid prices these pairs as prompts of 2 window - 1 tokens (mean keys per
        query = window), the measured attention at the windowed length."""
        pairs = w.prefill_q_sq + w.prefill_q_ctx
        cap = w.prefill_tokens * self.window
        if pairs <= cap:
            windowed = w
        else:
            windowed = work((w.tokens, w.prefill_tokens, 0.0, cap,
                             min(w.prefill_kv_tokens, w.prefill_tokens + self.window), w.decode_seqs, w.queries,
                             w.moe_tokens))
        m = self.m
        return self._prefill_attention(windowed, heads, int(round(max(1.0, m.num_kv_heads / self.lay.tp))),
                                       m.head_dim, self.kv_bytes)

    def _prefill_attention(self, w: Work, heads: int, kv_heads: int, dim: int, kv_bytes: float) -> float:
        s = self.dep.sparse_attention
        q_sq, q_ctx = w.prefill_q_sq, w.prefill_q_ctx
        if self.gqa_grid and s is None:
            return self.pricer.gqa_prefill_s(self.kv_op_dtype, w.prefill_tokens, q_sq, q_ctx, heads, kv_heads, dim)
        t = 0.0
        if s is not None:  # each query attends at most top_k tokens; the indexer scores every causal pair
            pairs = q_ctx + q_sq
            ib = ops.check_dtype(s.indexer_dtype)["act_bytes"]
            keys_bytes = (w.prefill_tokens * s.indexer_heads + w.prefill_kv_tokens) * s.indexer_head_dim * ib
            t += self.pricer.time_s("attn_prefill", s.indexer_dtype,
                                    2.0 * s.indexer_heads * s.indexer_head_dim * pairs, keys_bytes)
            q_sq, q_ctx = min(pairs, w.prefill_tokens * s.top_k_tokens), 0.0
        seq = (q_sq + q_ctx) / w.prefill_tokens  # mean keys a query attends (the shape forms' length term)
        share = q_sq / (q_sq + q_ctx) if q_sq + q_ctx > 0 else 0.0  # pairs among the new tokens
        return t + self.pricer.attn_prefill_s("bf16", *ops.attn_prefill_work(
            q_sq, q_ctx, w.prefill_tokens, w.prefill_kv_tokens, heads, kv_heads, dim, kv_bytes), seq, share)

    def decode_attention(self, w: Work, ctx):
        """Decode attention of `w.decode_seqs` sequences with `ctx` cached tokens in all: a float for one step, an
        array for a run of steps; both go through `OpPricer.time_s_array`, so they agree exactly."""
        m, s, seqs = self.m, self.dep.sparse_attention, w.decode_seqs
        if self.dsa is not None:  # the measured module: draft tokens being verified as more sequences of the
            # same context (each runs the projections and attends the same keys)
            return self.pricer.dsa_module_s("dsa_module_decode", self.dsa[1], self.dsa[2], self.dsa[0],
                                            int(round(self.heads)), seqs * w.queries, ctx * w.queries)
        heads = int(round(self.heads)) * w.queries  # draft tokens being verified attend like extra heads
        t: Any = 0.0  # (an array over a run's contexts)
        if s is not None:
            ib = ops.check_dtype(s.indexer_dtype)["act_bytes"]
            t = self.pricer.time_s_array("attn_decode", s.indexer_dtype,
                                         2.0 * s.indexer_heads * s.indexer_head_dim * w.queries * ctx,
                                         (ctx + seqs * w.queries * s.indexer_heads) * s.indexer_head_dim * ib)
            cap = seqs * s.top_k_tokens
            ctx = np.minimum(ctx, cap) if isinstance(ctx, np.ndarray) else min(ctx, cap)
        if m.attention_kind == "gqa":
            kv = int(round(max(1.0, m.num_kv_heads / self.lay.tp)))
            full = self._gqa_decode(seqs, ctx, heads, kv)
            if self.linear is not None:
                return t + ((1.0 - self.linear_share) * full
                            + self.linear_share * self.linear.decode_s(w.decode_seqs * w.queries))
            if self.window_share <= 0.0:
                return t + full
            # a sliding-window layer reads at most `window` cached tokens per sequence (exact when every
            # sequence holds at least `window`; otherwise a bound on the context sum)
            cap = seqs * self.window
            windowed_ctx = np.minimum(ctx, cap) if isinstance(ctx, np.ndarray) else min(ctx, cap)
            return t + ((1.0 - self.window_share) * full
                        + self.window_share * self._gqa_decode(seqs, windowed_ctx, heads, kv))
        self._note_mla("decode")
        if self.pricer.grid is not None and not self._mla_reason:
            return t + self.pricer.mla_decode_s(self.kv_op_dtype, seqs, ctx, heads)
        return t + self.pricer.time_s_array("attn_mla_decode", self.kv_op_dtype, *ops.attn_mla_decode_work(
            seqs, ctx, heads, m.kv_lora_rank, m.qk_rope_head_dim, self.kv_bytes))

    def _gqa_decode(self, seqs: float, ctx, heads: int, kv: int):
        """GQA decode attention of `seqs` sequences holding `ctx` cached tokens in all (a float or an array)."""
        m = self.m
        if self.gqa_grid:
            return self.pricer.gqa_decode_s(self.kv_op_dtype, seqs, ctx, heads, kv, m.head_dim)
        return self.pricer.time_s_array("attn_decode", self.kv_op_dtype, *ops.attn_decode_work(
            seqs, ctx, heads, kv, m.head_dim, self.kv_bytes))

    # -- feed-forward -----------------------------------------------------------------------------------------
    def dense_ffn(self, T: float) -> float:
        inter, f = self.m.intermediate_size / self.lay.tp, self.fmt["ffn"]
        return self.gemm(T, self.gate * inter, self.m.hidden_size, f) + self.gemm(T, self.m.hidden_size, inter, f)

    def moe_ffn(self, w: Work) -> tuple[float, float, float, float, float]:
        """(router + shared-expert GEMM seconds, routed-expert seconds, all-to-all seconds, host fetch seconds,
        routed rows this device's experts compute)."""
        lay, e, H, T = self.lay, self.m.moe, self.m.hidden_size, w.tokens
        assert e is not None  # (called for MoE layers only)
        dense = self.gemm(T, e.num_experts, H, "bf16")
        if e.shared_experts:
            si, f = e.expert_intermediate_size / lay.tp * e.shared_experts, self.fmt["shared_experts"]
            dense += self.gemm(T, self.gate * si, H, f) + self.gemm(T, H, si, f)
        if lay.ep > 1:
            mean_rows = w.moe_tokens * e.top_k / lay.ep
            skew = self.base_imbalance * (ex.statistical_factor(mean_rows, lay.ep)
                                          if self.dep.experts.statistical_imbalance else 1.0)
            rows = mean_rows * skew
            slots = lay.expert_slots_per_layer / lay.ep
            active = min(rows, ex.active_experts(slots, e.num_experts, e.top_k, w.moe_tokens))
            inter = e.expert_intermediate_size / lay.moe_tp
        else:
            rows = T * e.top_k
            active = ex.active_experts(e.num_experts, e.num_experts, e.top_k, T)
            inter = e.expert_intermediate_size / lay.tp
        f = self.fmt["experts"]
        routed = 0.0
        if rows > 0 and self.moe_grid:  # the measured block: the grid's tokens are the tokens the whole EP group
            # routes (each EP rank computes tokens x top_k / ep rows of them: at a fixed token count the measured
            # EP 2 block takes half the EP 1 block's time even where it is compute-bound); the busiest rank's
            # `rows` under the balanced distribution, the group's tokens under a power law (whose kernels saw the
            # skew themselves)
            skewed = self.moe_distribution == "balanced"
            tokens = rows * lay.ep / e.top_k if skewed else (w.moe_tokens if lay.ep > 1 else T)
            # each of the ep groups splits its experts over moe_tp devices (ep 1: moe_tp = tp; moe_tp 1: whole)
            tp, ep = (1, lay.moe_tp * lay.ep) if self.moe_tp_as_ep else (lay.moe_tp, lay.ep)
            routed = self._block_s(f, tokens, tp, ep)
            if skewed:
                saved_s, loaded_s = self._random_routing_s(f, tokens, tp, ep, rows)
                routed = min(routed, max(routed - saved_s, loaded_s))
        elif rows > 0:  # grouped GEMMs: `active` experts of rows / active tokens each; DeepGEMM's contiguous layout
            # with prefill tokens in the step, the masked (CUDA-graph) layout for decode-only steps
            g, per, lay_ = max(active, 1.0), rows / max(active, 1.0), ("contiguous" if w.prefill_tokens else "masked")
            routed = (self.pricer.gemm_s("moe_gemm", f, per, self.gate * inter, H,
                                         *ops.moe_gemm_work(rows, active, self.gate * inter, H, f), g, lay_)
                      + self.pricer.gemm_s("moe_gemm", f, per, H, inter,
                                           *ops.moe_gemm_work(rows, active, H, inter, f), g, lay_))
        comm = 0.0
        # Dispatch and combine move tokens between attention DP ranks. With one DP rank (ep = tp) every device of
        # the EP group already holds every token after the attention all-reduce: each computes its own experts'
        # rows and the MLP all-reduce priced with the layer sums their outputs (vLLM runs its all-to-all kernels
        # only for dp > 1; TensorRT-LLM's MoE all-to-all needs attention DP; SGLang's EP MoE without DP attention
        # reduces over the TP group).
        if lay.ep > 1 and lay.dp > 1:
            c = self.dep.communication
            wire = max(T * e.top_k / lay.tp, rows)
            kernel = c.ep_kernel_prefill if w.prefill_tokens else c.ep_kernel_decode
            for phase, dt in (("dispatch", c.dispatch_dtype), ("combine", c.combine_dtype)):
                comm += self.links.all_to_all_s(wire, H * ops.check_dtype(dt)["act_bytes"], e.top_k, c.node_dedup,
                                                kernel, dt, phase)
        hits = ex.expected_cold_hits(lay.cold_experts, self.cold_share, e.top_k, w.moe_tokens)
        fetch = self.links.host_fetch_s(hits / lay.ep * self.expert_bytes)
        return dense, routed, comm, fetch, rows

    def _block_s(self, f: str, tokens: float, tp: int, ep: int) -> float:
        """The measured routed-expert block of the table's (tp, ep) split at `tokens` (the layer's distribution)."""
        e = self.m.moe
        assert e is not None
        return self.pricer.moe_block_s(f, tokens, self.m.hidden_size, e.expert_intermediate_size, e.top_k,
                                       e.num_experts, tp, ep, self.moe_distribution)

    def _random_routing_s(self, f: str, tokens: float, tp: int, ep: int, rows: float) -> tuple[float, float]:
        """(seconds the measured balanced block spent on expert weights that random routing leaves unloaded, the
        hit experts' bytes at the GPU's memory bandwidth: the floor).

        AIConfigurator's balanced routing sends each token's top-k to distinct experts spread evenly, so the
        measured rank of the table's (tp, ep) split runs min(E, tokens x top_k) / ep distinct experts: every one of
        its experts is hit once tokens x top_k reaches E (the measured blocks' time grows in proportion to the
        tokens up to there and is flat after it, in every engine's table). Routing that is uniform at random hits
        fewer: a device holding `slots` experts (whole under EP, 1/tp of each otherwise) whose `rows` routed rows
        land at random hits slots x (1 - (1 - 1/slots)^rows) of them (the TP split: E x (1 - (1 - k/E)^tokens)).
        The same table says what loading that many experts takes: its balanced block at the token count whose
        distinct experts carry the same weight bytes, t_eq = min(E, tokens x k) / k x hit bytes / measured bytes.
        The saving is the table's own difference, block(min(tokens, E / k)) - block(t_eq): the kernel's measured
        time per expert loaded, not an assumed bandwidth (the blocks load at 55-90% of it, by kernel). The rows
        that random routing piles onto the hit experts cost at decode sizes what the weights do not: nothing
        measurable at these sizes, and prefill-sized batches hit every expert either way (no saving).
        docs/cost-model.md, "Balanced tables, random routing"."""
        e, lay = self.m.moe, self.lay
        assert e is not None
        full_bytes = self.expert_bytes * lay.moe_tp
        distinct = min(float(e.num_experts), tokens * e.top_k)
        measured_bytes = distinct / ep * full_bytes / tp
        if lay.ep > 1:
            slots = lay.expert_slots_per_layer / lay.ep
            hit = slots * (1.0 - (1.0 - 1.0 / slots) ** rows)
        else:
            hit = ex.active_experts(e.num_experts, e.num_experts, e.top_k, rows / e.top_k)
        hit_bytes = hit * self.expert_bytes
        loaded_s = hit_bytes / self.pricer.hw.mem_bandwidth_bytes_per_s
        if measured_bytes <= 0.0 or hit_bytes >= measured_bytes:
            return 0.0, loaded_s
        all_hit = min(tokens, e.num_experts / e.top_k)
        t_eq = min(all_hit, distinct / e.top_k * hit_bytes / measured_bytes)
        saved_s = self._block_s(f, all_hit, tp, ep) - self._block_s(f, t_eq, tp, ep)
        return max(0.0, saved_s), loaded_s

    # -- a whole layer ----------------------------------------------------------------------------------------
    def layer(self, w: Work, ctx, moe: bool, graphed: bool = True) -> LayerCost:
        """One layer for work `w` with decode context sums `ctx` (a float, or an array over decode steps), in an
        iteration that replays a CUDA graph or not (`graphed`: which measured custom all-reduce runs)."""
        graphed = graphed or not self.links.eager_differs
        layers = self.cache.layers
        key = (w, moe, graphed)
        st = layers.get(key)
        if st is None:
            st = self._layer_static(w, moe, graphed)
            self.cache.remember(layers, key, st)
        if not w.decode_seqs:
            return st
        decode = self.decode_attention(w, ctx)
        return LayerCost({**st.compute, "attention": st.compute["attention"] + decode}, st.comm_s, st.fetch_s,
                         st.launches)

    def _layer_static(self, w: Work, moe: bool, graphed: bool) -> LayerCost:
        """Everything of a layer but its decode attention (which alone depends on the decode contexts): the prefill
        attention beside the part that depends on the rows only (`_rows_part`)."""
        rows = self._rows_part(w, moe, graphed)
        return LayerCost({**rows.compute, "attention": self.prefill_attention(w)}, rows.comm_s, rows.fetch_s,
                         rows.launches)

    def _rows_part(self, w: Work, moe: bool, graphed: bool) -> LayerCost:
        """A layer's projections, MLP or MoE, elementwise ops, communication and launches: what depends on its
        rows (tokens, and for MLA the latent up-projection and absorbed decode rows; for MoE the routed tokens),
        not on how the prefill tokens split into chunks nor on the decode contexts. Kept in the step cache by those
        rows: mixed steps met once mostly share them with steps met before (attention part 0)."""
        mla = self.m.attention_kind == "mla"
        key = ("rows", w.tokens, w.prefill_tokens > 0, w.decode_seqs > 0, w.moe_tokens, moe,
               w.prefill_kv_tokens if mla else 0.0, w.decode_seqs * w.queries if mla else 0.0, graphed)
        kept = self.cache.layers
        lc = kept.get(key)
        if lc is None:
            lc = self._price_rows(w, moe, graphed)
            self.cache.remember(kept, key, lc)
        return lc

    def _price_rows(self, w: Work, moe: bool, graphed: bool) -> LayerCost:
        m, lay, T = self.m, self.lay, w.tokens
        proj, launches = self.attention(w)
        parts = {"attention": 0.0, "dense_gemm": proj, "moe_gemm": 0.0}
        comm = 2 * self.links.allreduce_s(T * m.hidden_size * 2.0, graphed)
        launches += 2 * (lay.tp > 1) + ELEMENTWISE_KERNELS
        if m.qk_norm_across_heads and lay.tp > 1:
            # the query and key norms span every head: one all-reduce of each token's two fp32 partial sums of
            # squares (vLLM's MiniMax-M2 attention reduces q's and k's in one call)
            comm += self.links.allreduce_s(T * 2 * 4.0, graphed)
            launches += 1
        fetch = 0.0
        # Elementwise: norms, residuals and rotary over the rank's tokens; the activation over the MLP's rows. The
        # activation width follows calibrate.shapes.elementwise_dims (the routed experts' for every layer of an
        # MoE model), except under EP, where the routed rows a device receives replace the rank's tokens x top-k.
        e = m.moe
        inter = (m.intermediate_size if e is None else e.expert_intermediate_size * e.top_k) / lay.tp
        act = T * 2 * inter
        act_rows, act_cols = T, inter
        if moe:
            assert e is not None  # (MoE layers exist only in MoE models)
            dense, routed, a2a, fetch, rows = self.moe_ffn(w)
            if self.moe_grid:  # the measured expert kernels ran the routed activation: only the shared experts'
                shared = e.expert_intermediate_size * e.shared_experts / lay.tp
                act = T * 2 * shared
                act_rows, act_cols = (T, shared) if shared else (0.0, 0.0)
            elif lay.ep > 1:
                inter_ep = e.expert_intermediate_size / lay.moe_tp
                act = rows * 2 * inter_ep
                act_rows, act_cols = rows, inter_ep
            parts["dense_gemm"] += dense
            parts["moe_gemm"] = routed
            comm += a2a
            launches += 1 + 2 * bool(e.shared_experts) + 2 + 2 * (lay.ep > 1 and lay.dp > 1)
        else:
            parts["dense_gemm"] += self.dense_ffn(T)
            launches += 2
        elements = T * (4 * m.hidden_size + m.num_heads * m.head_dim / lay.tp) + act
        if m.attention_kind == "gqa":
            rope_cols = (self.heads + max(1.0, m.num_kv_heads / lay.tp)) * m.head_dim
        else:
            rope_cols = (self.heads + 1.0) * m.qk_rope_head_dim
        parts["elementwise"] = self.pricer.elementwise_layer_s(T, m.hidden_size, rope_cols, act_rows, act_cols,
                                                               elements)
        return LayerCost(parts, comm, fetch, launches)
