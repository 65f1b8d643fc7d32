"""Checks that the calibration calls each kernel correctly: one shape per kernel, output against the kernel's own
float64 reference on the same inputs (`cuda_ops.reference`).

The kernels' own tests and `python -m kernels.bench` check the kernels; this checks our adapter (layouts, scales,
offsets, block tables) so a profile never rests on a kernel fed wrong operands. Tolerance on ||out - ref|| / ||ref||:
1e-2 on a GPU (bf16 output rounding 2^-8, bf16 P in attention, Hopper FP8 accumulation; the bench's reasoning),
5e-3 under the interpreter (fp32 dots: only the bf16 output rounding).
"""
from __future__ import annotations

import os

import torch

from calibrate import cuda_ops
from calibrate.shapes import OpShape

# One shape per kernel: layer shapes of the two models at moderate size (GPU), toy sizes (interpreter).
GPU_SHAPES: dict[str, tuple[str, str, dict[str, int]]] = {
    "kernels.gemm_fp8_block": ("gemm", "fp8_block", {"m": 256, "n": 2048, "k": 7168}),
    "kernels.gemm_int8": ("gemm", "int8", {"m": 256, "n": 6144, "k": 4096}),
    "kernels.gemm_int4_wo": ("gemm", "int4_wo", {"m": 8, "n": 4096, "k": 14336}),
    "kernels.moe_grouped": ("moe_gemm", "fp8_block", {"t": 512, "e": 64, "n": 4096, "k": 7168}),
    "kernels.attn_prefill": ("attn_prefill", "bf16", {"b": 2, "q": 512, "c": 256, "h": 32, "kvh": 8, "dqk": 128,
                                                      "dv": 128}),
    "kernels.attn_paged_decode": ("attn_decode", "bf16", {"b": 16, "c": 2000, "h": 32, "kvh": 8, "d": 128}),
    "kernels.attn_mla_decode": ("attn_mla_decode", "bf16", {"b": 8, "c": 1000, "h": 128, "r": 512, "rope": 64}),
}
TOY_SHAPES: dict[str, tuple[str, str, dict[str, int]]] = {
    "kernels.gemm_fp8_block": ("gemm", "fp8_block", {"m": 5, "n": 256, "k": 256}),
    "kernels.gemm_int8": ("gemm", "int8", {"m": 5, "n": 64, "k": 128}),
    "kernels.gemm_int4_wo": ("gemm", "int4_wo", {"m": 3, "n": 64, "k": 256}),
    "kernels.moe_grouped": ("moe_gemm", "bf16", {"t": 12, "e": 3, "n": 64, "k": 128}),
    "kernels.attn_prefill": ("attn_prefill", "bf16", {"b": 2, "q": 16, "c": 8, "h": 4, "kvh": 2, "dqk": 64,
                                                      "dv": 64}),
    "kernels.attn_paged_decode": ("attn_decode", "bf16", {"b": 2, "c": 40, "h": 4, "kvh": 2, "d": 64}),
    "kernels.attn_mla_decode": ("attn_mla_decode", "bf16", {"b": 2, "c": 70, "h": 4, "r": 128, "rope": 32}),
}


def check_adapters(device: torch.device, toy: bool | None = None) -> list[dict]:
    """One row per kernel: impl, shape, relative error, tolerance, ok, error (if it raised)."""
    from kernels.common import relative_error

    interpreted = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
    toy = interpreted if toy is None else toy
    tol = 5e-3 if interpreted else 1e-2
    rows = []
    for impl, (op, dtype, dims) in (TOY_SHAPES if toy else GPU_SHAPES).items():
        shape = OpShape(op, dtype, tuple(dims.items()), 0.0, 0.0)
        row = {"impl": impl, "op": op, "dtype": dtype, "shape": shape.shape, "tolerance": tol}
        try:
            bench = cuda_ops.BUILDERS[impl](shape, device)
            inputs = bench.make_inputs()
            out = bench.run(inputs)
            ref = cuda_ops.reference(impl, shape, inputs)
            err = relative_error(out.float(), ref)
            row |= {"rel_err": err, "ok": bool(err < tol), "error": ""}
        except Exception as exc:  # a broken adapter or kernel is a result, not a crash
            row |= {"rel_err": float("nan"), "ok": False,
                    "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"}
        if device.type == "cuda":
            torch.cuda.empty_cache()
        rows.append(row)
    return rows
