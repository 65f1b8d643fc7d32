"""The project's analytical pricing of the same rows, through the simulator's own pricer (nothing re-implemented).

`analytical_s(family, cols, hardware)` prices each grid row the way the simulator would price that shape without
a profile: `sim.core.cost.pricer.OpPricer` over the conf/hardware datasheet, `conf/cost/roofline.yaml` and the
hardware generation's forms (`calibrate.efficiency`), and `sim.core.cost.comm.Links` for collectives. Mapping:

* gemm: `OpPricer.gemm_s("gemm", dtype, m, n, k, ...)`.
* attn_prefill: `OpPricer.attn_prefill_s(compute, ...)` of `batch` prompts of `seq` tokens, no cached prefix
  (mean attended keys (seq + 1) / 2, causal share 1).
* attn_decode: `OpPricer.time_s_array("attn_decode", kv dtype, ...)` of `batch` sequences of `ctx` tokens.
* moe: the two routed `moe_gemm` calls of `LayerPricer.moe_ffn` (gated: up/gate and down; 1 matrix up for the
  `nongated` kernels) over `tokens x topk` rows on `experts / ep` local experts (the expected active count of
  `sim.core.cost.experts.active_experts`), intermediate split by `tp`, the `contiguous` layout. The table's
  kernels also run the activation, which the simulator prices with the layer's elementwise ops (not added here).
* mla_prefill: `OpPricer.attn_prefill_s("bf16", ...)` as `LayerPricer._prefill_attention` prices MLA (kv_heads =
  heads, the mean of the (nope + rope) and v widths, BF16 keys); mla_decode: `OpPricer.time_s_array("attn_mla_decode",
  kv dtype, ...)` over DeepSeek-V3's latent width (`calibrate.aic.names.MLA_DIMS`).
* mla_bmm: the `gemm` calls `LayerPricer.attention` makes for MLA decode's absorbed products ([tokens, heads x
  rank] over nope for `mla_bmm_pre`, [tokens, heads x v] over rank for `mla_bmm_post`).
* deepep_normal / deepep_ll: `Links.all_to_all_s` with the `deepep_normal` / `deepep_low_latency` kernel, ep = the
  row's ranks (8 per node), `tokens x topk` rows of `hidden` values in the phase's format (node de-duplication
  for the normal kernels, as the DeepSeek prefill deployment states).
* custom_allreduce and NCCL all-reduce: `Links.allreduce_s` at tp = gpus; NCCL all-to-all: `Links.all_to_all_s`
  (`generic` kernel) of the per-rank buffer; all-gather and reduce-scatter: the simulator prices none (NaN).
* gdn_prefill / gdn_decode: `OpPricer.time_s("linear_attn", "bf16", ...)` of the kernel's roofline work as
  `LayerPricer._linear_prefill` / `_linear_decode` price it (`calibrate.ops.gdn_conv_work`, `gdn_chunk_work`,
  `gdn_recurrent_work`; `batch` sequences of `seq` tokens, or of one token in decode; a 4-tap convolution).
* dsa_prefill / dsa_decode: not compared (NaN): without the module's table the simulator prices its projections,
  indexer and attention kernel one by one (docs/cost-model.md, "Sparse-attention (DSA) layers").
It lives with the simulator's programs: calibration never imports the simulator.
"""
from __future__ import annotations

import numpy as np

from inferplan.config.yaml_files import read_yaml_mapping
from calibrate import ops
from calibrate.aic.names import MLA_DIMS
from calibrate.efficiency import hardware_generation, load_generation
from inferplan.specs import CONF_DIR, load_hardware


def _cost() -> dict:
    return read_yaml_mapping(CONF_DIR / "cost" / "roofline.yaml")


def analytical_s(family: str, cols: dict[str, np.ndarray], hardware: str) -> np.ndarray:
    """Seconds the analytical model gives each row of one family's grid columns (NaN where it prices none)."""
    from sim.core.pricing import Links, OpPricer, active_experts

    hw = load_hardware(hardware)
    gen = load_generation(hardware_generation(hw.source))
    cost = _cost()
    pricer = OpPricer(hw, cost["efficiency"], cost["launch_s"], None, {}, gen)
    n = len(cols["latency_s"])
    out = np.full(n, np.nan)
    num = {c: np.asarray(cols[c], dtype=np.float64) for c in cols if c not in ("family", "op", "dtype", "compute",
                                                                               "variant", "kernel", "version")}
    dtype, compute, op = cols["dtype"], cols["compute"], cols["op"]
    for i in range(n):
        g = {c: num[c][i] for c in num}
        if family in ("gdn_prefill", "gdn_decode"):
            b, vh, kh, d = g["batch"], g["heads"], g["kv_heads"], g["head_dim"]
            tokens = b * g["seq"] if family == "gdn_prefill" else b
            if op[i] in ("gdn_conv_prefill", "gdn_conv_decode"):
                work = ops.gdn_conv_work(tokens, b, 2.0 * kh * d + vh * d, 4.0)
            elif op[i] == "gdn_chunk_prefill":
                work = ops.gdn_chunk_work(tokens, b, vh, kh, d, d)
            else:
                work = ops.gdn_recurrent_work(b, vh, kh, d, d)
            out[i] = pricer.time_s("linear_attn", "bf16", *work)
        elif family == "gemm":
            m, nn, k = g["m"], g["n"], g["k"]
            out[i] = pricer.gemm_s("gemm", dtype[i], m, nn, k, *ops.gemm_work(m, nn, k, dtype[i]))
        elif family == "attn_prefill":
            b, s = g["batch"], g["seq"]
            q_sq, tokens = b * s * (s + 1) / 2.0, b * s
            kv_bytes = ops.check_dtype(dtype[i])["act_bytes"]
            work = ops.attn_prefill_work(q_sq, 0.0, tokens, tokens, int(g["heads"]), int(g["kv_heads"]),
                                         int(g["head_dim"]), kv_bytes)
            out[i] = pricer.attn_prefill_s(compute[i], *work, q_sq / tokens, 1.0)
        elif family == "attn_decode":
            b = g["batch"]
            kv_bytes = ops.check_dtype(dtype[i])["act_bytes"]
            work = ops.attn_decode_work(b, b * g["ctx"], int(g["heads"]), int(g["kv_heads"]), int(g["head_dim"]),
                                        kv_bytes)
            out[i] = float(pricer.time_s_array("attn_decode", dtype[i], *work))
        elif family == "mla_prefill":
            b, s, h = g["batch"], g["seq"], int(g["heads"])
            q_sq, tokens = b * s * (s + 1) / 2.0, b * s
            dim = (MLA_DIMS["qk_nope_head_dim"] + MLA_DIMS["qk_rope_head_dim"] + MLA_DIMS["v_head_dim"]) // 2
            work = ops.attn_prefill_work(q_sq, 0.0, tokens, tokens, h, h, dim, 2.0)
            out[i] = pricer.attn_prefill_s("bf16", *work, q_sq / tokens, 1.0)
        elif family == "mla_decode":
            b = g["batch"]
            kv_bytes = ops.check_dtype(dtype[i])["act_bytes"]
            work = ops.attn_mla_decode_work(b, b * g["ctx"], int(g["heads"]), MLA_DIMS["kv_lora_rank"],
                                            MLA_DIMS["qk_rope_head_dim"], kv_bytes)
            out[i] = float(pricer.time_s_array("attn_mla_decode", dtype[i], *work))
        elif family == "mla_bmm":
            t, h, rank = g["tokens"], g["heads"], MLA_DIMS["kv_lora_rank"]
            n, k = ((h * rank, MLA_DIMS["qk_nope_head_dim"]) if op[i] == "mla_bmm_pre"
                    else (h * MLA_DIMS["v_head_dim"], rank))
            out[i] = pricer.gemm_s("gemm", dtype[i], t, n, k, *ops.gemm_work(t, n, k, dtype[i]))
        elif family in ("deepep_normal", "deepep_ll"):
            p = int(g["gpus"])
            links = Links(hw, tp=1, ep=p, stage_devices=p, pp=1, link_efficiency=float(cost["link_efficiency"]),
                          scale={}, generation=gen)
            width = ops.check_dtype(dtype[i])["act_bytes"]
            kernel = "deepep_normal" if family == "deepep_normal" else "deepep_low_latency"
            out[i] = links.all_to_all_s(g["tokens"] * g["topk"], g["hidden"] * width, int(g["topk"]),
                                        family == "deepep_normal", kernel)
        elif family in ("dsa_prefill", "dsa_decode"):
            out[i] = np.nan  # (without the module's table the simulator prices its ops one by one: no one op)
        elif family == "moe":
            tokens, k, e, tp, ep, h = g["tokens"], int(g["topk"]), int(g["experts"]), g["tp"], g["ep"], g["hidden"]
            rows = tokens * k
            if ep > 1:
                active = min(rows, active_experts(e / ep, e, k, tokens * ep))
            else:
                active = active_experts(e, e, k, tokens)
            inter = g["inter"] / tp
            gate = 1 if "nongated" in cols["kernel"][i] else 2
            per, groups = rows / max(active, 1.0), max(active, 1.0)
            f = dtype[i]
            out[i] = (pricer.gemm_s("moe_gemm", f, per, gate * inter, h,
                                    *ops.moe_gemm_work(rows, active, gate * inter, h, f), groups, "contiguous")
                      + pricer.gemm_s("moe_gemm", f, per, h, inter, *ops.moe_gemm_work(rows, active, h, inter, f),
                                      groups, "contiguous"))
        else:
            p = int(g["gpus"])
            links = Links(hw, tp=p, ep=p, stage_devices=p, pp=1, link_efficiency=float(cost["link_efficiency"]),
                          scale={}, generation=gen)
            if family == "custom_allreduce" or op[i] == "allreduce":
                out[i] = links.allreduce_s(g["bytes"])
            elif op[i] == "all_to_all":
                width = ops.check_dtype(dtype[i])["act_bytes"]
                out[i] = links.all_to_all_s(g["bytes"] / width, width, 1, False, "generic")
    return out
