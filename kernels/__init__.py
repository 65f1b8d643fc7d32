"""Triton kernels that a low-cost LLM serving stack runs, each beside a plain-torch reference, timed by `bench`.

The calibration times these kernels at a model's layer shapes; their FLOP and byte counts define the roofline the
timings are judged against. Read first:
- `gemm_fp8_block.py`: the kernel template every module follows (private `@triton.jit` kernel, `keep()`-filtered
  autotune list with a documented key, a wrapper that checks, allocates and launches, a `reference_*` in torch).
- `quant.py`: the formats (fp8_block128, int8_per_token / per_channel, int4_wo_g128) as pure functions.
- `costs.py`: the FLOP and byte formulas (pure Python) used by the benchmark and the calibration.

Families: `gemm_fp8_block`, `gemm_int8`, `gemm_int4_wo`, `moe_grouped` (bf16 and FP8-block, with the
routing sort), `attn_prefill` (varlen causal flash attention, GQA, cached prefix), `attn_paged_decode` (GQA, bf16 or
FP8 KV, split-KV), `attn_mla_decode` (DeepSeek MLA with absorbed weights). `common.py` holds the shared checks and
interpreter switch; `bench.py` (`python -m kernels.bench`) checks and times them on a GPU;
`compile_check.py` (`python -m kernels.compile_check`) compiles every autotune config for sm_90 without a GPU.
Nothing is imported here, so `import kernels.costs` needs neither torch nor triton.
"""
