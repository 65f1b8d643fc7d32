"""Which implementations time each (op, dtype) on each backend, and which one the profile stands for.

The *primary* implementation is what our serving stack runs (our Triton kernels on CUDA, torch on CPU); the
others are library baselines timed beside it for comparison. The profile's curve for an (op, dtype) is fitted on
the primary's time at each shape, or the fastest baseline's where the primary does not take the shape
(`Unsupported`): what a stack would run there. Adding an implementation = one builder + one line here.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from calibrate import cuda_ops, torch_ops
from calibrate.shapes import OpShape
from calibrate.torch_ops import Bench


@dataclass(frozen=True)
class Impl:
    name: str
    primary: bool
    build: Callable[[OpShape, torch.device], Bench]


def _t(name: str, primary: bool = True) -> Impl:
    return Impl(name, primary, torch_ops.BUILDERS[name])


def _k(name: str) -> Impl:
    return Impl(name, True, cuda_ops.BUILDERS[name])


TABLES: dict[str, dict[tuple[str, str], tuple[Impl, ...]]] = {
    "cpu": {
        ("gemm", "fp32"): (_t("torch.matmul"),),
        ("gemm", "bf16"): (_t("torch.matmul"),),
        ("gemm", "int8"): (_t("torch._int_mm"),),
        ("gemm", "int4_wo"): (_t("torch.int4pack_cpu"),),
        ("moe_gemm", "fp32"): (_t("torch.expert_loop"),),
        ("moe_gemm", "bf16"): (_t("torch.expert_loop"),),
        ("attn_prefill", "bf16"): (_t("torch.sdpa_prefill"),),
        ("attn_decode", "bf16"): (_t("torch.sdpa_decode"),),
        ("attn_mla_decode", "bf16"): (_t("torch.mla_decode"),),
        ("elementwise", "bf16"): (_t("torch.eager"),),
    },
    "cuda": {
        ("gemm", "bf16"): (_t("torch.matmul"),),
        ("gemm", "fp16"): (_t("torch.matmul"),),
        ("gemm", "fp8_block"): (_k("kernels.gemm_fp8_block"), _t("torch._scaled_mm", False)),
        ("gemm", "int8"): (_k("kernels.gemm_int8"), _t("torch._int_mm", False)),
        ("gemm", "int4_wo"): (_k("kernels.gemm_int4_wo"),),
        ("moe_gemm", "bf16"): (_k("kernels.moe_grouped"), _t("torch._grouped_mm", False)),
        ("moe_gemm", "fp8_block"): (_k("kernels.moe_grouped"),),
        ("attn_prefill", "bf16"): (_k("kernels.attn_prefill"), _t("torch.sdpa_prefill", False)),
        ("attn_decode", "bf16"): (_k("kernels.attn_paged_decode"), _t("torch.sdpa_decode", False)),
        ("attn_mla_decode", "bf16"): (_k("kernels.attn_mla_decode"), _t("torch.mla_decode", False)),
        ("elementwise", "bf16"): (_t("torch.eager"),),
    },
}


def impls_for(table: str, op: str, dtype: str) -> tuple[Impl, ...]:
    """Implementations of (op, dtype) in `table` ("cpu" or "cuda"); empty when none exists (e.g. FP8 on CPU)."""
    return TABLES[table].get((op, dtype), ())
