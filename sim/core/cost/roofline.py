"""An iteration's time composed layer by layer from priced ops, for any deployment (`sim.core.cost.deployment`).

1. DP attention: the scheduled batch is spread over `dp` ranks; the busiest rank gets ceil(n/dp) of the prefill
   chunks and of the decodes, each of the mean size (a sequence cannot be split across ranks, so one long prompt
   lands on one rank). Its share sets the attention and dense time; every layer waits for the slowest rank.
2. Micro-batches: the rank's share is split evenly into `pp_micro_batches` (pipeline) x 2 (two-micro-batch
   overlap) pieces; each layer is priced for one piece (`sim.core.cost.layers`).
3. Overlap: without it a layer takes compute + communication; with two micro-batches it takes
   max(2 compute, 2 communication) (one micro-batch's all-to-all runs while the other computes), plus, once per
   stage pass, min(compute, communication) of one micro-batch (the first compute / last transfer cannot hide).
   Compute parts are reported in full; `communication` holds only the exposed rest, the hidden part is
   `StepCost.hidden_s`. Cold-expert fetches are never hidden.
4. Pipeline: the slowest stage (its layers; the LM head and MTP drafts on the last) plus the send of one
   micro-batch's hidden states is a slot; an iteration is `pp_micro_batches` slots, plus pp - 1 more when
   `pp_bubble` (fill and drain each iteration; off: the pipeline stays full across iterations, as engines that keep
   pp batches in flight).
5. MTP: a decode verifies 1 + n tokens (n drafts) in the main model; each of n draft steps runs the MTP module (one
   layer + eh_proj + LM head) on one token per sequence (the first also over prefill tokens, to fill its KV).
6. Host overhead per iteration (`sim.core.cost.host`).

Parts (`sim.core.cost.base.PARTS`) sum to the total. A run of decode steps is priced in one vectorised call: only the
decode context changes between its steps, and step_cost(b) is the same call with one context.
"""
from __future__ import annotations

import math
from typing import Any, Final, NamedTuple
import numpy as np

from inferplan.paths import shown_path
from inferplan.specs import HardwareSpec, ModelSpec
from sim.core.cost.base import PARTS, BatchShape, StepCost
from sim.core.cost.comm import Links
from sim.core.cost.deployment import Deployment, parse_deployment
from sim.core.cost.host import HostOverhead, resolve_host
from sim.core.cost.host_overlap import scheduled_cost
from sim.core.cost.layers import COMPUTE_PARTS, LayerCost, LayerPricer, Work, work
from sim.core.cost.layout import build_layout
from sim.core.cost.percontext import PerContext, larger, pick, smaller
from sim.core.cost.pricer import OpPricer, grid_source
from sim.core.cost.tables import StepCache, StepTable


_GPU_PARTS: Final = COMPUTE_PARTS + ("communication",)  # (the parts that are GPU time: all but the host overhead)


class Composed(NamedTuple):
    """One composition: the iteration's total, its parts (PARTS), hidden communication, the GPU time the host
    overhead was priced against, and the kernel launches it counted (floats, or arrays over context sums)."""

    total: PerContext
    parts: dict[str, PerContext]
    hidden: PerContext
    gpu: PerContext
    launches: int


def _share(n: int, ranks: int) -> float:
    """Fraction of n items the busiest of `ranks` ranks gets (ceil(n / ranks) / n)."""
    return math.ceil(n / ranks) / n if n else 0.0


class LayeredCostModel:
    """Prices an iteration of one instance of `model` on `hw`, laid out by `deployment` (default: one replica on
    `tp` devices, every weight in `weights_dtype`). Attention reads KV in `kv_dtype`; `link_efficiency` scales the
    datasheet links for collectives. `role` (the pool's: unified, prefill or decode) says which steps it prices.
    """

    def __init__(self, model: ModelSpec, hw: HardwareSpec, pricer: OpPricer, *, tp: int = 1,
                 weights_dtype: str = "bf16", kv_dtype: str = "bf16", step_overhead_s: float = 0.0,
                 link_efficiency: float = 1.0, deployment: Deployment | None = None,
                 host: HostOverhead | None = None, where: str = "cost model", role: str = "unified") -> None:
        if tp < 1:
            raise ValueError("tp must be >= 1")
        dep = deployment or parse_deployment(None, tp=tp, weights_dtype=weights_dtype, where=where)
        if dep.tp != tp:
            raise ValueError(f"deployment.tp={dep.tp} differs from tp={tp}")
        self.m, self.hw, self.pricer, self.tp, self.dep = model, hw, pricer, tp, dep
        self.lay = build_layout(model, dep, where)
        self.links = Links(hw, tp=tp, ep=dep.ep, stage_devices=self.lay.stage_devices, pp=dep.pp,
                           link_efficiency=link_efficiency, scale=pricer.efficiency_scale,
                           generation=pricer.generation, grid=pricer.grid,
                           moe_shape=((model.hidden_size, model.moe.top_k, model.moe.num_experts)
                                      if model.moe is not None else (0, 0, 0)))
        self.steps = StepCache(self._price, self._price_step)  # every kept cost
        self.layers = LayerPricer(model, dep, self.lay, pricer, self.links, kv_dtype, self.steps)
        self.host = host or resolve_host(dep.host, step_overhead_s, pricer.profile)
        g = pricer.generation
        gf = g.gemm_form("bf16") if g is not None else None
        sms = gf.sms if gf is not None else 0
        comm_sms = dep.communication.comm_sms
        if comm_sms and sms and comm_sms >= sms:
            raise ValueError(f"communication.comm_sms={comm_sms} leaves no SM of {sms} for compute")
        self.sm_frac = comm_sms / sms if comm_sms and sms else 0.0
        self.tokens_per_step = dep.tokens_per_step
        self.draft_tokens = dep.draft_tokens
        self.acceptance = () if dep.mtp is None else dep.mtp.acceptance
        self._dense_layers = any(st.dense_layers for st in self.lay.stages)
        self._moe_layers = any(st.moe_layers for st in self.lay.stages)
        # Which ops are priced from where (`describe`) is a property of the configuration, not of the traffic met
        # so far: one step of the pool's role (a prefill chunk and/or a decode) resolves every op it can use.
        if role not in ("unified", "prefill", "decode"):
            raise ValueError(f"role must be unified, prefill or decode, not {role!r}")
        chunk = BatchShape(prefill_seqs=1, prefill_tokens=64, prefill_q_sq_sum=64 * 65 // 2, prefill_kv_tokens=64,
                           sampled_seqs=1)
        probe = {"prefill": chunk, "decode": BatchShape(decode_seqs=1, sampled_seqs=1),
                 "unified": chunk._replace(decode_seqs=1, sampled_seqs=2)}[role]
        self._price(probe, 512.0 if probe.decode_seqs else 0.0)
        c = dep.communication
        kernels = {"prefill": (c.ep_kernel_prefill,), "decode": (c.ep_kernel_decode,),
                   "unified": (c.ep_kernel_prefill, c.ep_kernel_decode)}[role]  # (the steps this pool runs)
        self.links.declare(pricer, kernels, (c.dispatch_dtype, c.combine_dtype), self.lay.cold_experts > 0)

    @property
    def kind(self) -> str:
        return self.pricer.kind

    def describe(self) -> dict:
        p, d, lay = self.pricer, self.dep, self.lay
        analytical_ops = sorted(f"{o}/{t}" for o, t in p.analytical)
        out: dict[str, Any] = {
               "kind": p.kind, "profile": None if p.profile is None else shown_path(p.profile.path), "hardware": self.hw.name,
               "measured_ops": sorted(f"{o}/{t}" for o, t in p.measured),
               "analytical_ops": analytical_ops,
               "deployment": {"preset": d.preset, "devices": lay.devices, "tp": d.tp, "dp": d.dp,
                              "ep": d.ep, "pp": d.pp, "pp_micro_batches": d.micro_batches, "pp_bubble": d.pp_bubble,
                              "weights": dict(d.weights), "overlap": d.communication.overlap,
                              "tokens_per_step": self.tokens_per_step,
                              "sparse_attention_top_k": (None if d.sparse_attention is None
                                                         else d.sparse_attention.top_k_tokens)},
               "host": self.host.describe(),
               "hidden_communication": "StepCost.hidden_s: communication overlapped by compute, not in the parts"}
        if p.grid is not None:  # a grid profile: where its measurements come from, and what fell back and why
            assert p.profile is not None
            out["source"] = grid_source(p.profile.provenance, self.hw.name)
            out["fallback"] = {k: p.fallback.get(k, "not in the tables") for k in analytical_ops}
            # (the fallbacks of ops the database does not measure at all: they leave the pricing `measured`)
            out["not_in_database"] = sorted(k for k in analytical_ops if k in p.absent)
        if self.m.moe is not None:
            out["experts"] = {"slots_per_device": lay.expert_slots_per_layer * lay.expert_share_per_device,
                              "placement_imbalance": self.layers.base_imbalance,
                              "statistical_imbalance": d.experts.statistical_imbalance,
                              "cold_experts_per_layer": lay.cold_experts, "cold_traffic_share": self.layers.cold_share}
            if p.grid is not None:  # (the measured MoE block's routing distribution)
                out["experts"]["moe_distribution"] = self.layers.moe_distribution
                if self.layers.moe_tp_as_ep:
                    out["experts"]["moe_tp_split"] = (f"priced as the measured EP {lay.tp} block: the tables measure "
                                                      "no TP split of this format")
        return out

    # -- composition ------------------------------------------------------------------------------------------
    def _works(self, b: BatchShape, split: int) -> tuple[Work, list[tuple[Work, float]], float, float, float]:
        """The busiest device's work per micro-batch; the MTP draft steps' works with their LM-head rows; the
        decode-context factor; the main LM-head rows; the rank's tokens per iteration."""
        dp, q = self.dep.dp, 1 + self.draft_tokens
        fp, fd, fs = _share(b.prefill_seqs, dp), _share(b.decode_seqs, dp), _share(b.sampled_seqs, dp)
        rank_tokens = fp * b.prefill_tokens + fd * b.decode_seqs * q
        group = b.prefill_tokens + b.decode_seqs * q if self.dep.ep > 1 else rank_tokens
        g = 1.0 / split
        main = work((rank_tokens * g, fp * b.prefill_tokens * g, fp * b.prefill_q_ctx_sum * g,
                     fp * b.prefill_q_sq_sum * g, fp * b.prefill_kv_tokens * g, fd * b.decode_seqs * g, q, group * g))
        drafts = []
        for i in range(self.draft_tokens):  # draft step i: one token per decoding sequence (+ the prompts, first)
            pf = fp * g if i == 0 else 0.0
            dec = fd * b.decode_seqs * g
            tokens = pf * b.prefill_tokens + dec
            grp = (b.prefill_tokens * (i == 0) + b.decode_seqs) * g if self.dep.ep > 1 else tokens
            drafts.append((work((tokens, pf * b.prefill_tokens, pf * b.prefill_q_ctx_sum, pf * b.prefill_q_sq_sum,
                                 pf * b.prefill_kv_tokens, dec, 1, grp)), fs * b.sampled_seqs * g))
        head_rows = (fs * b.sampled_seqs + fd * b.decode_seqs * (q - 1)) * g
        return main, drafts, fd * g, head_rows, rank_tokens

    def _overlapped(self, lc: LayerCost, u: int) -> tuple[dict[str, PerContext], PerContext]:
        """One layer's parts for u pieces: compute in full; `communication` = the exposed communication (all of
        it without overlap; max(2c + 2x f, 2x) - 2c with two micro-batches, f = comm_sms / sms: while a
        communication kernel runs it holds that share of the SMs, so compute under it loses x f) plus the host
        fetches; and the once-per-pass fill min(c, x) of the overlap (0 without)."""
        parts = dict(lc.compute) if u == 1 else {k: u * lc.compute[k] for k in COMPUTE_PARTS}
        if u == 2:
            c = lc.compute_s()
            exposed, fill = larger(2 * c + 2 * lc.comm_s * self.sm_frac, 2 * lc.comm_s) - 2 * c, smaller(c, lc.comm_s)
        else:
            exposed, fill = lc.comm_s, 0.0
        parts["communication"] = exposed + u * lc.fetch_s
        return parts, fill

    def _stage(self, st, dense: LayerCost | None, moe: LayerCost | None, draft: list, head_s: float, u: int):
        """(parts, hidden communication, launches) of one micro-batch slot of stage `st`."""
        parts: dict[str, PerContext] = dict.fromkeys(_GPU_PARTS, 0.0)
        comm_work, fetch, launches = 0.0, 0.0, 0
        layers: list[tuple[LayerCost, int, bool]] = []  # (layer, how many, takes the stage's fill)
        if st.dense_layers:
            assert dense is not None
            layers.append((dense, st.dense_layers, st.moe_layers == 0))
        if st.moe_layers:
            assert moe is not None
            layers.append((moe, st.moe_layers, True))
        if st.last:
            parts["dense_gemm"] = u * head_s
            launches += u
            layers += [(lc, 1, True) for lc, _ in draft]
            for _, extra_s in draft:
                parts["dense_gemm"] = parts["dense_gemm"] + u * extra_s
                launches += 2 * u
        for lc, n, with_fill in layers:
            lp, fill = self._overlapped(lc, u)
            for k in parts:
                parts[k] = parts[k] + n * lp[k]
            if with_fill:
                parts["communication"] = parts["communication"] + fill
            comm_work = comm_work + n * u * lc.comm_s
            fetch += n * u * lc.fetch_s
            launches += n * u * lc.launches
        return parts, larger(0.0, comm_work - (parts["communication"] - fetch)), launches

    def _pieces(self, b: BatchShape) -> int:
        """Micro-batches per pipeline slot: 2 under two-micro-batch overlap (when the rank has 2 tokens to split), else 1."""
        dep, q = self.dep, 1 + self.draft_tokens
        rank_est = _share(b.prefill_seqs, dep.dp) * b.prefill_tokens + _share(b.decode_seqs, dep.dp) * b.decode_seqs * q
        return 2 if dep.communication.overlap == "two_micro_batches" and rank_est >= 2 else 1

    def _price(self, b: BatchShape, ctx: PerContext) -> tuple[PerContext, dict[str, PerContext], PerContext]:
        """(total, parts, hidden communication) of shape b with decode_ctx_sum = ctx: floats for one context, arrays
        (elementwise the same arithmetic) for an array of contexts."""
        c = self._compose(b, ctx)
        return c.total, c.parts, c.hidden

    def _compose(self, b: BatchShape, ctx: PerContext) -> Composed:
        """The layer composition of shape b at decode context sum(s) ctx (module doc, steps 1-6)."""
        dep, lay, lp = self.dep, self.lay, self.layers
        u, mb = self._pieces(b), dep.micro_batches
        main, drafts, ctx_factor, head_rows, rank_tokens = self._works(b, mb * u)
        ctx = ctx * ctx_factor
        graphed = self.host.graphed(rank_tokens)
        dense = lp.layer(main, ctx, False, graphed) if self._dense_layers else None
        moe = lp.layer(main, ctx, True, graphed) if self._moe_layers else None
        draft = [(lp.layer(w, ctx, self.m.moe is not None, graphed), lp.eh_proj(w.tokens) + lp.lm_head(rows))
                 for w, rows in drafts]
        head_s = lp.lm_head(head_rows)
        best: tuple[PerContext, dict[str, PerContext], PerContext, int] | None = None
        for st in lay.stages:
            parts, hidden, launches = self._stage(st, dense, moe, draft, head_s, u)
            t: PerContext = 0.0
            for k in parts:
                t = t + parts[k]
            if best is None:
                best = (t, parts, hidden, launches)
            else:  # the slowest stage sets the slot, step by step
                slower = t > best[0]
                best = (pick(slower, t, best[0]), {k: pick(slower, parts[k], best[1][k]) for k in parts},
                        pick(slower, hidden, best[2]), max(launches, best[3]))
        assert best is not None  # (a layout has at least one stage)
        _, parts, hidden, launches = best
        slots = mb + (dep.pp - 1 if dep.pp_bubble else 0)
        send = self.links.pp_send_s(main.tokens * u * self.m.hidden_size * 2.0)
        out = {k: slots * v for k, v in parts.items()}
        out["communication"] = out["communication"] + slots * send
        gpu: PerContext = 0.0
        for k in _GPU_PARTS:
            gpu = gpu + out[k]
        out["overhead"] = self.host.seconds(slots * launches, gpu, rank_tokens)
        total: PerContext = 0.0
        for k in PARTS:
            total = total + out[k]
        return Composed(total, out, slots * hidden, gpu, slots * launches)

    # -- the CostModel surface --------------------------------------------------------------------------------
    def step_cost(self, b: BatchShape, load_s: float = 0.0, host_s: float = 0.0, overlap: int = 0,
                  back_to_back: bool = False) -> StepCost:
        """The iteration's cost (`CostModel.step_cost`): the shape's from the step cache
        (`sim.core.cost.tables.StepCache`: decode-only shapes read their context table, what runs read;
        prefill-only shapes are priced once; mixed shapes are composed in full from the kept layer parts), with
        the KV load and exposed host work of the scheduled iteration (`sim.core.cost.host_overlap`)."""
        cost = self.steps.step_cost(b)
        if load_s or host_s or overlap:
            return scheduled_cost(cost, load_s, host_s, overlap, back_to_back)
        return cost

    def _price_step(self, b: BatchShape) -> StepCost:
        """One step priced in full (the layer composition at its context sum)."""
        total, parts, hidden = self._price(b, float(b.decode_ctx_sum))
        return StepCost(total_s=float(total), parts={k: float(parts[k]) for k in PARTS}, hidden_s=float(hidden))

    def decode_steps(self, b: BatchShape, steps: int) -> tuple[StepTable, int, int]:
        """A run of `steps` decode-only iterations of the same sequences, the first of shape b, every context one
        token longer per step: (table, first, stride) such that step j costs `table.times[first + j * stride]`
        (the simulator's hot path: the run is a strided slice of this shape's table of step costs over a window of
        context sums, `sim.core.cost.tables`)."""
        return self.steps.decode_steps(b, steps)

    def decode_run(self, b: BatchShape, steps: int, ctx_sums=None, with_hidden: bool = False, compact: bool = False):
        """Step times of `steps` consecutive decode-only iterations of the same sequences, the first of shape `b`;
        step j has decode_ctx_sum = ctx_sums[j] (default: every context one token longer per step). Returns the
        totals and the parts per step (arrays), and the hidden communication per step when `with_hidden`.
        Element j equals `step_cost(b with decode_ctx_sum = ctx_sums[j])` exactly. With `compact`, parts and
        hidden that do not change from step to step stay floats."""
        if ctx_sums is None:
            table, first, stride = self.decode_steps(b, steps)
            return table.run_arrays(first, stride, steps, with_hidden, compact)
        ctx_sums = np.asarray(ctx_sums, dtype=np.float64)
        if len(ctx_sums) != steps:
            raise ValueError(f"ctx_sums has {len(ctx_sums)} entries for {steps} steps")
        total, parts, hidden = self._price(b, ctx_sums)
        return StepTable.priced(0, steps, total, parts, hidden).run_arrays(0, 1, steps, with_hidden, compact)
