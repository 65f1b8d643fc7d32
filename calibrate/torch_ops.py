"""Plain-torch implementations of every op, on any device: the CPU profile's kernels and the CUDA library baselines.

Each builder turns an `OpShape` into a `Bench`: `make_inputs()` allocates one fresh set of operands (the timer
makes several and rotates them so caches do not hold the data), `run(inputs)` launches the op once. Values are
random (a random block tiled to size, so large operands are cheap to make); they only need to be realistic for
timing (GPUs draw more power, and run slower, on random data than on zeros).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from calibrate.shapes import OpShape

TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


@dataclass(frozen=True)
class Bench:
    """What the timer runs: `run(make_inputs())`; `operand_bytes` sizes the rotation pool."""

    make_inputs: Callable[[], tuple]
    run: Callable[[tuple], object]
    operand_bytes: float


class Unsupported(ValueError):
    """The implementation does not take this shape (a documented limit, not a failure): recorded as skipped."""


def rand(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device | str, scale: float = 1.0) -> torch.Tensor:
    """A tensor of `shape` holding a random block of up to 2^16 normal values, cast to `dtype` and tiled (only
    the final tensor is allocated at full size)."""
    n = math.prod(shape)
    block = (torch.randn(min(max(n, 1), 1 << 16), device=device, dtype=torch.float32) * scale).to(dtype)
    reps = math.ceil(n / block.numel())
    if dtype.is_floating_point and dtype.itemsize == 1:  # float8: tile the bytes (fewer kernels support fp8)
        return block.view(torch.uint8).repeat(reps)[:n].view(dtype).view(shape)
    return block.repeat(reps)[:n].view(shape)


def rand_scales(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
    """Positive quantization scales in [0.5, 1.5) x 1e-2 (realistic magnitudes; values do not affect timing)."""
    return ((torch.rand(shape, device=device) + 0.5) * 1e-2).to(dtype)


def rand_int8(shape: tuple[int, ...], device: torch.device | str) -> torch.Tensor:
    n = math.prod(shape)
    block = torch.randint(-127, 128, (min(max(n, 1), 1 << 16),), dtype=torch.int8, device=device)
    return block.repeat(math.ceil(n / block.numel()))[:n].view(shape)


def _float_dtype(shape: OpShape) -> torch.dtype:
    if shape.dtype not in TORCH_DTYPES:
        raise Unsupported(f"{shape.op}/{shape.dtype}: plain torch runs only {', '.join(TORCH_DTYPES)} here")
    return TORCH_DTYPES[shape.dtype]


# -- GEMMs ----------------------------------------------------------------------------------------------------
def matmul(shape: OpShape, device: torch.device) -> Bench:
    """`F.linear` (x[m,k] @ w[n,k]^T) in the shape's float format; per-head `bmm` when the shape has `heads`."""
    dt = _float_dtype(shape)
    m, n, k = shape.dim("m"), shape.dim("n"), shape.dim("k")
    heads = dict(shape.dims).get("heads", 0)
    if heads:  # MLA absorbed decode: x[h, m, k] @ w[h, k, n/h]
        def make() -> tuple:
            return rand((heads, m, k), dt, device), rand((heads, k, n // heads), dt, device, k ** -0.5)
        return Bench(make, lambda a: torch.bmm(a[0], a[1]), (m * k + n * k) * dt.itemsize)

    def make() -> tuple:
        return rand((m, k), dt, device), rand((n, k), dt, device, k ** -0.5)
    return Bench(make, lambda a: F.linear(a[0], a[1]), (m * k + n * k) * dt.itemsize)


def int_mm(shape: OpShape, device: torch.device) -> Bench:
    """W8A8 through `torch._int_mm` (int32 accumulation) plus the per-token x per-channel scale epilogue to bf16."""
    m, n, k = shape.dim("m"), shape.dim("n"), shape.dim("k")
    if device.type == "cuda" and (m <= 16 or k % 8 or n % 8):
        raise Unsupported(f"torch._int_mm on CUDA needs M > 16 and K, N multiples of 8, got {m}x{n}x{k}")

    def make() -> tuple:
        return (rand_int8((m, k), device), rand_int8((n, k), device).t(),
                torch.rand(m, 1, device=device) * 1e-2, torch.rand(1, n, device=device) * 1e-2)

    def run(a: tuple) -> torch.Tensor:
        return (torch._int_mm(a[0], a[1]).float() * a[2] * a[3]).to(torch.bfloat16)
    return Bench(make, run, m * k + n * k)


def int4pack_cpu(shape: OpShape, device: torch.device) -> Bench:
    """W4A16, group 128, through aten's CPU int4 kernel (`_weight_int4pack_mm_for_cpu`, the torchao CPU path)."""
    m, n, k = shape.dim("m"), shape.dim("n"), shape.dim("k")
    if k % 128:
        raise Unsupported(f"int4 CPU kernel needs K divisible by 128, got {k}")

    def make() -> tuple:
        codes = torch.randint(0, 16, (n, k), dtype=torch.int32, device=device)
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(codes, 8)
        scales_zeros = rand((k // 128, n, 2), torch.bfloat16, device, 1e-2)
        return rand((m, k), torch.bfloat16, device), packed, scales_zeros

    return Bench(make, lambda a: torch.ops.aten._weight_int4pack_mm_for_cpu(a[0], a[1], 128, a[2]),
                 2 * m * k + n * k / 2)


def scaled_mm(shape: OpShape, device: torch.device) -> Bench:
    """FP8 e4m3 through `torch._scaled_mm` with row-wise scales (the library baseline for fp8_block: same bytes,
    coarser scales)."""
    m, n, k = shape.dim("m"), shape.dim("n"), shape.dim("k")
    fp8 = torch.float8_e4m3fn

    def make() -> tuple:
        a = rand((m, k), torch.float32, device).to(fp8)
        b = rand((n, k), torch.float32, device).to(fp8).t()  # column-major [k, n], as cuBLASLt wants
        return a, b, torch.rand(m, 1, device=device) + 0.5, torch.rand(1, n, device=device) + 0.5

    def run(a: tuple) -> torch.Tensor:
        return torch._scaled_mm(a[0], a[1], scale_a=a[2], scale_b=a[3], out_dtype=torch.bfloat16)
    return Bench(make, run, m * k + n * k)


# -- MoE --------------------------------------------------------------------------------------------------------
def expert_split(rows: int, experts: int) -> list[int]:
    """Rows per expert when `rows` routed rows spread as evenly as possible over `experts` active experts."""
    base, extra = divmod(rows, experts)
    return [base + (1 if j < extra else 0) for j in range(experts)]


def expert_loop(shape: OpShape, device: torch.device) -> Bench:
    """Grouped GEMM as one `F.linear` per active expert over its contiguous slice of the sorted rows."""
    dt = _float_dtype(shape)
    t, e, n, k = (shape.dim(d) for d in ("t", "e", "n", "k"))
    counts = expert_split(t, e)

    def make() -> tuple:
        return rand((t, k), dt, device), rand((e, n, k), dt, device, k ** -0.5)

    def run(a: tuple) -> torch.Tensor:
        x, w = a
        out = torch.empty((t, n), dtype=dt, device=x.device)
        start = 0
        for j, cnt in enumerate(counts):
            if cnt:
                out[start:start + cnt] = F.linear(x[start:start + cnt], w[j])
            start += cnt
        return out
    return Bench(make, run, (t * k + e * n * k) * dt.itemsize)


def grouped_mm(shape: OpShape, device: torch.device) -> Bench:
    """`torch._grouped_mm` over the sorted rows with cumulative per-expert offsets (the library baseline)."""
    dt = _float_dtype(shape)
    t, e, n, k = (shape.dim(d) for d in ("t", "e", "n", "k"))
    offs = torch.tensor(expert_split(t, e), dtype=torch.int32).cumsum(0).to(torch.int32)

    def make() -> tuple:
        return rand((t, k), dt, device), rand((e, n, k), dt, device, k ** -0.5).transpose(-2, -1), offs.to(device)
    return Bench(make, lambda a: torch._grouped_mm(a[0], a[1], offs=a[2]), (t * k + e * n * k) * dt.itemsize)


# -- attention ----------------------------------------------------------------------------------------------------
def sdpa_prefill(shape: OpShape, device: torch.device) -> Bench:
    """Causal `scaled_dot_product_attention` of q new tokens after c cached ones per sequence (bottom-right mask)."""
    b, q, c, h, kvh, dqk, dv = (shape.dim(d) for d in ("b", "q", "c", "h", "kvh", "dqk", "dv"))
    bf = torch.bfloat16
    mask = None if c == 0 else torch.ones(q, c + q, dtype=torch.bool, device=device).tril(c)

    def make() -> tuple:
        return (rand((b, h, q, dqk), bf, device), rand((b, kvh, c + q, dqk), bf, device),
                rand((b, kvh, c + q, dv), bf, device))

    def run(a: tuple) -> torch.Tensor:
        return F.scaled_dot_product_attention(a[0], a[1], a[2], attn_mask=mask, is_causal=mask is None,
                                              enable_gqa=kvh != h)
    return Bench(make, run, 2 * b * (h * q * dqk + kvh * (c + q) * (dqk + dv)))


def sdpa_decode(shape: OpShape, device: torch.device) -> Bench:
    """One query per sequence against a contiguous KV cache of c tokens (SDPA; no paging)."""
    b, c, h, kvh, d = (shape.dim(x) for x in ("b", "c", "h", "kvh", "d"))
    bf = torch.bfloat16

    def make() -> tuple:
        return rand((b, h, 1, d), bf, device), rand((b, kvh, c, d), bf, device), rand((b, kvh, c, d), bf, device)
    return Bench(make, lambda a: F.scaled_dot_product_attention(a[0], a[1], a[2], enable_gqa=kvh != h),
                 2 * b * (h * d + 2 * kvh * c * d))


def mla_decode(shape: OpShape, device: torch.device) -> Bench:
    """Absorbed MLA decode in torch: scores of q[b,h,r+rope] against the latent cache[b,c,r+rope], softmax,
    then values from the cache's first r columns."""
    b, c, h, r, rope = (shape.dim(x) for x in ("b", "c", "h", "r", "rope"))
    bf, scale = torch.bfloat16, (r + rope) ** -0.5

    def make() -> tuple:
        return rand((b, h, r + rope), bf, device), rand((b, c, r + rope), bf, device)

    def run(a: tuple) -> torch.Tensor:
        q, cache = a
        p = (torch.bmm(q, cache.transpose(1, 2)).float() * scale).softmax(-1).to(bf)
        return torch.bmm(p, cache[:, :, :r])
    return Bench(make, run, 2 * b * (h * (r + rope) + c * (r + rope)))


# -- elementwise --------------------------------------------------------------------------------------------------
def layer_elementwise(shape: OpShape, device: torch.device) -> Bench:
    """One layer's elementwise passes, unfused as in eager torch: RMSNorm + residual add (twice), SwiGLU over the
    `i` activation columns, rotary embedding over the `r` query columns."""
    t, h, i, r = (shape.dim(x) for x in ("t", "h", "i", "r"))
    bf = torch.bfloat16

    def make() -> tuple:
        return (rand((t, h), bf, device), rand((t, h), bf, device), torch.ones(h, dtype=bf, device=device),
                rand((t, 2 * i), bf, device), rand((t, r), bf, device), rand((t, r // 2), bf, device),
                rand((t, r // 2), bf, device))

    def run(a: tuple) -> torch.Tensor:
        x, res, w, gate_up, q, cos, sin = a
        res = res + F.rms_norm(x, (h,), w)
        res = res + F.rms_norm(res, (h,), w)
        g, u = gate_up.chunk(2, dim=-1)
        act = F.silu(g) * u
        q1, q2 = q.chunk(2, dim=-1)
        rot = torch.cat([q1 * cos - q2 * sin, q2 * cos + q1 * sin], dim=-1)
        return res, act, rot
    return Bench(make, run, 2 * (2 * t * h + 2 * t * i + 2 * t * r))


BUILDERS: dict[str, Callable[[OpShape, torch.device], Bench]] = {
    "torch.matmul": matmul,
    "torch._int_mm": int_mm,
    "torch.int4pack_cpu": int4pack_cpu,
    "torch._scaled_mm": scaled_mm,
    "torch.expert_loop": expert_loop,
    "torch._grouped_mm": grouped_mm,
    "torch.sdpa_prefill": sdpa_prefill,
    "torch.sdpa_decode": sdpa_decode,
    "torch.mla_decode": mla_decode,
    "torch.eager": layer_elementwise,
}
