"""Compile every kernel at every autotune config for Hopper (sm_90) ahead of time, with no GPU present.

    python -m kernels.compile_check            # prints registers, spill bytes and shared memory per config

The interpreter runs the kernels' arithmetic but not the compiler, which rejects code the interpreter accepts and
decides what is fast: tensor-core instructions (`wgmma` on Hopper, `mma` for 16-row tiles), registers, spills,
shared memory per pipeline stage. This script runs `triton.compile` for an sm_90 target with realistic argument
specializations (tensors and strides divisible by 16, unit strides as constants, as a launch would specialize
them), then reads the cubin with the `cuobjdump` in Triton's wheel. Exit status 1 when a config fails to compile,
spills registers to local memory, or needs more than the 227 KB of shared memory a Hopper block may use.
The `ASTSource` attribute format used here is triton 3.3 or newer.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

HOPPER_SMEM_LIMIT_BYTES = 232448  # 227 KB: cudaDevAttrMaxSharedMemoryPerBlockOptin on H100 / H200
_DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32", torch.float8_e4m3fn: "fp8e4nv",
           torch.int8: "i8", torch.uint8: "u8", torch.int32: "i32"}


@dataclass
class Spec:
    """One kernel variant: example arguments (tensors stand for pointers of their dtype), constexprs, configs."""
    label: str
    kernel: object
    args: tuple
    consts: dict
    configs: list


def _t(dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(0, dtype=dtype)


def _specs() -> list[Spec]:
    from kernels import attn_mla_decode as mla
    from kernels import attn_paged_decode as pd
    from kernels import attn_prefill as ap
    from kernels import gemm_fp8_block as g8
    from kernels import gemm_int4_wo as g4
    from kernels import gemm_int8 as gi8
    from kernels import moe_grouped as moe
    f8, bf, f32, i32 = torch.float8_e4m3fn, torch.bfloat16, torch.float32, torch.int32
    kept = lambda mod, keep=None: [c for c in mod._CONFIGS if (keep or mod._keep)(c)]  # noqa: E731
    m, n, k = 4096, 7168, 16384
    specs = [
        Spec("gemm_fp8_block", g8._gemm_fp8_block_kernel,
             (_t(f8), _t(f32), _t(f8), _t(f32), _t(bf), m, n, k, m, k, 1, 128, 1, k, 1, 128, 1, n, 1),
             {"SCALE_GROUP": 128, "DOT_FP32": False}, kept(g8)),
        Spec("gemm_int8", gi8._gemm_int8_kernel,
             (_t(torch.int8), _t(f32), _t(torch.int8), _t(f32), _t(bf), m, n, k, m, k, 1, k, 1, n, 1), {}, kept(gi8)),
    ]
    for zeros in (False, True):
        for split in (1, 4):
            specs.append(Spec(f"gemm_int4_wo zeros={zeros} split_k={split}", g4._gemm_int4_wo_kernel,
                              (_t(bf), _t(torch.uint8), _t(bf), _t(bf), _t(bf if split == 1 else f32), 16, 8192, 8192,
                               16, 8192, 1, 8192, 1, 8192, 1, 0 if split == 1 else 16 * 8192, 8192, 1),
                              {"GROUP_SIZE": 128, "HAS_ZEROS": zeros, "SYM_ZERO": 8, "SPLIT_K": split,
                               "DOT_FP32": False}, kept(g4)))
    for fp8 in (False, True):
        for block_m in (16, 64, 128):
            consts = {"FP8": fp8, "SCALE_GROUP": 128, "BLOCK_M": block_m, "DOT_FP32": False}
            configs = moe._prune(kept(moe, moe._keep_fp8 if fp8 else moe._keep_bf16), {}, **consts)
            dt = f8 if fp8 else bf
            specs.append(Spec(f"moe_grouped fp8={fp8} BLOCK_M={block_m}", moe._moe_grouped_kernel,
                              (_t(dt), _t(dt), _t(bf), _t(f32), _t(f32), _t(i32), _t(i32), _t(i32), 4096, 7168, 256,
                               7168, 1, 4096 * 7168, 7168, 1, 4096, 1, 64, 1, 32 * 64, 64, 1), consts, configs))
    for d in (64, 128):
        specs.append(Spec(f"attn_prefill head_dim={d}", ap._attn_prefill_kernel,
                          (_t(bf), _t(bf), _t(bf), _t(bf), _t(i32), _t(i32), 64 * d, d, 8 * d, d, 8 * d, d, 64 * d, d,
                           64, 8, 0.1, 4096), {"HEAD_DIM": d, "CAUSAL": True, "DOT_FP32": False}, kept(ap)))
    for kv in (bf, f8):
        for split in (False, True):
            s = 4 if split else 1
            specs.append(Spec(f"attn_paged_decode kv={_DTYPES[kv]} split={split}", pd._paged_decode_kernel,
                              (_t(bf), _t(kv), _t(kv), _t(i32), _t(i32), _t(f32 if split else bf), _t(f32),
                               64 * 128, 128, 16 * 1024, 1024, 128, 16 * 1024, 1024, 128, 2048, 64 * 128 * s,
                               128 * s, 128 * split, 64 * s, s, 0.1, 1.0, s),
                              {"GQA_GROUP": 8, "BLOCK_H": 16, "HEAD_DIM": 128, "PAGE_SIZE": 16, "SPLIT_KV": split,
                               "DOT_FP32": False}, kept(pd)))
    specs.append(Spec("combine_splits", pd._combine_splits_kernel,
                      (_t(f32), _t(f32), _t(bf), 64 * 8 * 512, 8 * 512, 512, 64 * 8, 8, 64 * 512, 512, 7),
                      {"SPLITS_P2": 8, "HEAD_DIM": 512}, [_config(4, 1)]))
    for split in (False, True):
        s = 4 if split else 1
        specs.append(Spec(f"attn_mla_decode split={split}", mla._mla_decode_kernel,
                          (_t(bf), _t(bf), _t(i32), _t(i32), _t(f32 if split else bf), _t(f32), 128 * 576, 576,
                           64 * 576, 576, 256, 128 * 512 * s, 512 * s, 512 * split, 128 * s, s, 128, 0.1, s),
                          {"RANK": 512, "ROPE": 64, "PAGE_SIZE": 64, "SPLIT_KV": split, "DOT_FP32": False},
                          kept(mla)))
    return specs


def _config(num_warps: int, num_stages: int) -> object:
    import triton
    return triton.Config({}, num_warps=num_warps, num_stages=num_stages)


def compile_sm90(spec: Spec, config: object) -> dict[str, object]:
    """Compile one config; returns registers, stack (spill) bytes, shared bytes and the MMA flavour in the PTX."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    consts = {**spec.consts, **config.kwargs}
    signature, constexprs, attrs, args = {}, {}, {}, list(spec.args)
    for i, name in enumerate(spec.kernel.arg_names):
        if name in consts:
            signature[name], constexprs[name] = "constexpr", consts[name]
            continue
        value = args.pop(0)
        if isinstance(value, torch.Tensor):
            signature[name], attrs[(i,)] = "*" + _DTYPES[value.dtype], [["tt.divisibility", 16]]
        elif isinstance(value, float):
            signature[name] = "fp32"
        elif value == 1:  # a launch specializes integer 1 into a constant
            signature[name], constexprs[name] = "constexpr", 1
        else:
            signature[name] = "i32"
            if value % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    compiled = triton.compile(ASTSource(spec.kernel, signature, constexprs, attrs), target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": config.num_warps, "num_stages": config.num_stages})
    cuobjdump = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "kernel.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        usage = subprocess.run([str(cuobjdump), "-res-usage", str(cubin)], capture_output=True, text=True,
                               check=True).stdout
    fields = dict(item.split(":") for item in next(line for line in usage.splitlines() if "REG:" in line).split())
    ptx = compiled.asm["ptx"]
    return {"registers": int(fields["REG"]), "stack_bytes": int(fields["STACK"]) + int(fields["LOCAL"]),
            "shared_bytes": int(compiled.metadata.shared),
            "mma": "wgmma" if "wgmma" in ptx else "mma" if "mma.sync" in ptx else "none"}


def main() -> int:
    os.environ["TRITON_INTERPRET"] = "0"  # before the kernel modules are imported: compile, do not interpret
    import triton
    specs = _specs()
    if not isinstance(specs[0].kernel, triton.runtime.JITFunction):
        print("compile_check: kernels were imported under TRITON_INTERPRET=1; run it in a fresh process",
              file=sys.stderr)
        return 2
    bad = 0
    for spec in specs:
        for config in spec.configs:
            label = f"{spec.label:<42} {str(config.kwargs):<48} w{config.num_warps} s{config.num_stages}"
            try:
                r = compile_sm90(spec, config)
            except Exception as err:  # NOTE: report every config's failure, not just the first
                print(f"{label} FAILED {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
                bad += 1
                continue
            problems = (["spills"] if r["stack_bytes"] else []) + (
                ["shared memory"] if r["shared_bytes"] > HOPPER_SMEM_LIMIT_BYTES else [])
            bad += bool(problems)
            print(f"{label} {r['mma']:<5} regs={r['registers']:<3} stack={r['stack_bytes']:<4} "
                  f"smem={r['shared_bytes'] // 1024:>3} KB {'BAD: ' + ', '.join(problems) if problems else 'ok'}",
                  flush=True)
    print(f"# {sum(len(s.configs) for s in specs)} configs compiled for sm_90, {bad} bad")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
