"""`python -m calibrate.ampere_fit <Vidur folder> [--write]`: elementwise kernels and attention, fitted on A100.

Vidur's A100 tables (MIT, Microsoft; ../shared/reference-profiles/vidur, not shipped) time each elementwise op of a
decoder layer separately (sarathi-serve kernels). Per kind (norm: input/post-attention RMSNorm; add: residual;
act: SiLU-and-mul; rope: rotary) this fits `floor + bytes / (bandwidth x e)` (linear least squares in relative
error) on every token count but every fourth (held out), and reports the held-out MAPE per Vidur op of the scalar
default (`elementwise` 0.60 + 4 us) and of the fit. Attention (the Llama-2-70B TP2 table): prefill
`launch + flops / (peak e_c s/(s+s0))` plus the new-token pairs at (k - 1) times a context pair (k: the profiled
kernel's causal factor, written as `vidur_profiler`; the simulator's form keeps k = 1) and decode `launch + max(flops / (peak e_c), bytes / (bw e_m))`
(`calibrate.efficiency`), fitted (Nelder-Mead, log error) on every tenth of the rows not held out (every fourth
row held out). `--write` puts the fits into conf/cost/generations/ampere.yaml (A100 is Ampere), each value citing
the files it comes from, with the GEMM form (`fit_gemm`, Vidur's four projections) and the NCCL all-reduce segments of `calibrate.nccl_fit` (Vidur's network tables).
"""
from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict

import numpy as np
import yaml

from inferplan.config.yaml_files import read_yaml_mapping
from calibrate.hopper_fit import nelder_mead
from calibrate.vidur import ELEMENTWISE, load_reference
from inferplan.specs import CONF_DIR, load_hardware
from calibrate.efficiency import PrefillForm, RooflineForm

KIND = {"input_layernorm": "norm", "post_attention_layernorm": "norm", "add": "add", "mlp_act": "act",
        "attn_rope": "rope"}
OUT = CONF_DIR / "cost" / "generations" / "ampere.yaml"


def fit(folder: str, hardware: str = "a100_80gb") -> tuple[dict, list[dict]]:
    hw = load_hardware(hardware)
    bw = hw.mem_bandwidth_bytes_per_s
    cost = read_yaml_mapping(CONF_DIR / "cost" / "roofline.yaml")
    points, _ = load_reference(folder)
    pts = [p for p in points if p.hardware == hw.name and p.vidur_op in ELEMENTWISE]
    tokens = sorted({p.tokens for p in pts})
    held = {t for i, t in enumerate(tokens) if i % 4 == 2}
    by_kind: dict[str, list] = defaultdict(list)
    for p in pts:
        by_kind[KIND[p.vidur_op]].append(p)
    params, lines = {}, []
    files = sorted({p.source.split("/")[1] + "/*/" + p.source.split("/")[-1] for p in pts})
    for kind, ps in sorted(by_kind.items()):
        train = [p for p in ps if p.tokens not in held]
        t = np.array([p.measured_s for p in train])
        a = np.stack([1.0 / t, np.array([p.bytes for p in train]) / t], axis=1)
        floor, g = np.linalg.lstsq(a, np.ones(len(t)), rcond=None)[0]
        eff = 1.0 / (float(g) * bw)
        basis = f"fit: vidur {', '.join(files)}, {', '.join(sorted({p.vidur_op for p in ps}))}, token counts not held out"
        params[kind] = {"efficiency": {"value": float(f"{eff:.6g}"), "basis": basis},
                        "floor_s": {"value": float(f"{max(float(floor), 0.0):.6g}"), "basis": basis}}
        for vop in sorted({p.vidur_op for p in ps}):
            test = [p for p in ps if p.vidur_op == vop and p.tokens in held]
            meas = [p.measured_s for p in test]
            before = [float(cost["launch_s"]) + p.bytes / bw / float(cost["efficiency"]["elementwise"]) for p in test]
            after = [max(float(floor), 0.0) + p.bytes / (bw * eff) for p in test]
            lines.append({"op": vop, "kind": kind, "n": len(test),
                          "before": float(np.mean([abs(b / m - 1) for b, m in zip(before, meas)]) * 100),
                          "after": float(np.mean([abs(x / m - 1) for x, m in zip(after, meas)]) * 100)})
    return params, lines


def _shape(p) -> dict[str, float]:
    return {k: float(v) for k, v in (kv.split("=") for kv in p.shape.split(","))}


ENGINE_CAUSAL_BASIS = ("kernel: the engines' FlashAttention-2 (vLLM 0.6 ships FA 2.6; varlen and paged, causal) "
                       "stops each query tile's key loop at the diagonal (n_block_max in flash_fwd_kernel.h), so a "
                       "new-token pair costs what a context pair costs; Vidur's profiled kernel did not "
                       "(vidur_profiler below)")


def prefill_seq_share(s: dict[str, float]) -> tuple[float, float]:
    """(mean attended keys, causal share of the pairs) of one Vidur prefill row (q new tokens after c cached): the
    `seq` and `causal_share` arguments of `PrefillForm.time_s`."""
    q, c = s["q"], s["c"]
    return c + (q + 1) / 2, q * (q + 1) / 2 / (q * c + q * (q + 1) / 2)


def fit_attention(folder: str, hardware: str = "a100_80gb") -> tuple[dict, list[dict]]:
    hw = load_hardware(hardware)
    peak, bw = hw.peak_for("bf16"), hw.mem_bandwidth_bytes_per_s
    cost = read_yaml_mapping(CONF_DIR / "cost" / "roofline.yaml")
    points, _ = load_reference(folder)
    params, lines = {}, []
    for op in ("attn_prefill", "attn_decode"):
        ps = [p for p in points if p.op == op and p.hardware == hw.name]
        if not ps:
            continue
        train = [p for i, p in enumerate(ps) if i % 4 != 2]
        held = [p for i, p in enumerate(ps) if i % 4 == 2]
        src = sorted({p.source for p in ps})[0]
        if op == "attn_prefill":
            def form(th):
                return PrefillForm(1 / (1 + math.exp(-th[0])), math.exp(th[1]), math.exp(th[2]),
                                   1.0 + math.exp(th[3]))

            def pred(fm, p):
                seq, share = prefill_seq_share(_shape(p))
                return fm.time_s(p.flops, p.bytes, seq, peak, bw, causal_share=share)
            x0 = [0.0, math.log(256.0), math.log(2e-5), math.log(0.5)]
        else:
            def form(th):
                return RooflineForm(0.5, 1 / (1 + math.exp(-th[0])), math.exp(th[1]))

            def pred(fm, p):
                return float(fm.time_s(p.flops, p.bytes, peak, bw))
            x0 = [1.0, math.log(2e-5)]
        sub = train[::10]
        th = nelder_mead(lambda th: sum(math.log(pred(form(th), p) / p.measured_s) ** 2 for p in sub), x0, iters=1500)
        fm = form(th)
        basis = f"fit: vidur {src}, every 10th of the rows not held out (row index mod 4 != 2)"
        params[op] = {k: {"value": float(f"{getattr(fm, k):.6g}"), "basis": basis} for k in fm.__dataclass_fields__}
        if op == "attn_decode":
            params[op]["compute_eff"]["basis"] = "assumption: 0.5 (decode is memory-bound in every row; not identifiable)"
        if op == "attn_prefill":  # kappa is the profiled kernel's, not the GPU's: engines' kernels skip masked tiles
            params["vidur_profiler"] = {"attn_prefill_causal_factor": {
                "value": params[op]["causal_factor"]["value"],
                "basis": basis + "; jointly with attn_prefill's other parameters: time follows q (c + q), the whole "
                         "q x q block of a chunk's new tokens computed (residuals by q and c); applies to tables "
                         "timed by Vidur's profiler (calibrate.crosscheck)"}}
            params[op]["causal_factor"] = {"value": 1.0, "basis": ENGINE_CAUSAL_BASIS}
        meas = [p.measured_s for p in held]
        before = [float(cost["launch_s"]) + max(p.flops / peak, p.bytes / bw) / float(cost["efficiency"][op])
                  for p in held]
        lines.append({"op": op, "kind": "attention", "n": len(held),
                      "before": float(np.mean([abs(b / m - 1) for b, m in zip(before, meas)]) * 100),
                      "after": float(np.mean([abs(pred(fm, p) / m - 1) for p, m in zip(held, meas)]) * 100)})
    return params, lines


A100_SMS = 108   # NVIDIA A100 datasheet / whitepaper: 108 SMs (SXM4 and PCIe)


def fit_gemm(folder: str, hardware: str = "a100_80gb") -> tuple[dict, list[dict]]:
    """The Hopper GEMM form (`calibrate.efficiency.GemmForm`: wave fill over 108 SMs, N tile chosen to fill them,
    per-tile K overhead, memory term) on Vidur's four bf16 projections (cuBLAS via sarathi), fitted (Nelder-Mead
    on the mean absolute relative error) on every 15th row of the token counts not held out (every fourth token
    count held out, as for the elementwise kernels); the priced time is floored at `launch_s` as the pricer does."""
    from calibrate.efficiency import GemmForm
    from calibrate.vidur import GEMMS

    hw = load_hardware(hardware)
    peak, bw = hw.peak_for("bf16"), hw.mem_bandwidth_bytes_per_s
    cost = read_yaml_mapping(CONF_DIR / "cost" / "roofline.yaml")
    launch = float(cost["launch_s"])
    points, _ = load_reference(folder)
    pts = [p for p in points if p.hardware == hw.name and p.vidur_op in GEMMS]
    tokens = sorted({p.tokens for p in pts})
    held = {t for i, t in enumerate(tokens) if i % 4 == 2}
    train = [p for p in pts if p.tokens not in held]
    sub = [(_shape(p), p) for p in train[::15]]

    def form(th):
        return GemmForm(1 / (1 + math.exp(-th[0])), math.exp(th[1]), 1 / (1 + math.exp(-th[2])), math.exp(th[3]),
                        sms=A100_SMS)

    def pred(f, s, p):
        return max(launch, f.time_s(s["m"], s["n"], s["k"], p.flops, p.bytes, peak, bw))

    th = nelder_mead(lambda th: sum(abs(pred(form(th), s, p) / p.measured_s - 1) for s, p in sub),
                     [1.0, math.log(64.0), 1.0, math.log(4e-6)], iters=800)
    f = form(th)
    files = sorted({p.source.split("/")[1] + "/*/" + p.source.split("/")[-1] for p in pts})
    basis = (f"fit: vidur {', '.join(files)}, {', '.join(GEMMS)}, every 15th row of the token counts not held out "
             "(every fourth token count held out), min mean |pred/measured - 1|")
    params = {"bf16": {k: {"value": float(f"{getattr(f, k):.6g}"), "basis": basis}
                       for k in ("compute_eff", "k_overhead", "memory_eff", "launch_s")}}
    params["bf16"].update({"tile_m": 128, "tile_n": 128, "sms": A100_SMS})
    lines = []
    for op in GEMMS:
        test = [p for p in pts if p.vidur_op == op and p.tokens in held]
        meas = [p.measured_s for p in test]
        before = [launch + max(p.flops / peak, p.bytes / bw) / float(cost["efficiency"]["gemm"]) for p in test]
        lines.append({"op": op, "kind": "gemm", "n": len(test),
                      "before": float(np.mean([abs(b / m - 1) for b, m in zip(before, meas)]) * 100),
                      "after": float(np.mean([abs(pred(f, _shape(p), p) / m - 1) for p, m in zip(test, meas)]) * 100)})
    return params, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m calibrate.elementwise_fit", description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="Vidur reference profiles, e.g. ../shared/reference-profiles/vidur")
    parser.add_argument("--write", action="store_true", help="write conf/cost/generations/ampere.yaml")
    args = parser.parse_args(argv)
    params, lines = fit(args.folder)
    attn, attn_lines = fit_attention(args.folder)
    lines += attn_lines
    gemm, gemm_lines = fit_gemm(args.folder)
    lines += gemm_lines
    from calibrate import nccl_fit

    nccl, nccl_lines = nccl_fit.fit(args.folder)
    lines += [{"op": f"all_reduce {r['hardware']} {r['link']} p={r['ranks']}", "kind": "nccl", "n": r["n"],
               "before": float("nan"), "after": r["after"]} for r in nccl_lines]
    for r in lines:
        print(f"{r['op']:<26} {r['kind']:<5} held out {r['n']:>5}  before {r['before']:5.1f}%  after {r['after']:5.1f}%")
    if args.write:
        OUT.write_text("# Ampere (A100) analytical GEMMs, elementwise kernels, attention and NCCL all-reduce (calibrate/efficiency.py), fitted to Vidur's "
                       "A100 tables.\n" + yaml.safe_dump({"generation": "ampere", "written_by":
                       "python -m calibrate.ampere_fit ../shared/reference-profiles/vidur --write",
                       "gemm": gemm, "elementwise": params, **attn, "nccl_allreduce": nccl}, sort_keys=False, width=200))
        print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
