"""gemm_int8 against its float64 reference, under the Triton interpreter."""
import pytest
import torch

from kernels.common import bf16_store_rounding, relative_error
from kernels.gemm_int8 import gemm_int8, reference_gemm_int8
from kernels.quant import quantize_int8_per_channel, quantize_int8_per_token

# int32 accumulation is exact; the epilogue scales in fp32 (~1e-7) and stores bf16 (`bf16_store_rounding()`
# relative per element: 2^-8 on a GPU, 2^-7 under the truncating interpreter), so the norm ratio stays under it; a
# wrong scale or missed tile is an O(1) error.
TOL = 1.28 * bf16_store_rounding()


def _operands(m, n, k, gen):
    a = torch.randn(m, k, generator=gen)
    b = torch.randn(n, k, generator=gen)
    return (*quantize_int8_per_token(a), *quantize_int8_per_channel(b))


# sizes straddle the 32x32x64 interpreter tiles
@pytest.mark.parametrize("m,n,k", [(1, 64, 64), (37, 45, 300), (70, 96, 130)])
def test_matches_reference(m, n, k, gen):
    a, a_s, b, b_s = _operands(m, n, k, gen)
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
    gemm_int8(a, a_s, b, b_s, out=out)
    err = relative_error(out, reference_gemm_int8(a, a_s, b, b_s))
    assert err < TOL, f"rel err {err:.2e} (seed {gen.initial_seed()})"


def test_large_values_do_not_overflow_the_accumulator(gen):
    # every product is 127 * 127: K = 1000 of them (1.6e7) fit int32 but not an fp16 accumulator
    a = torch.full((3, 1000), 127, dtype=torch.int8)
    b = torch.full((40, 1000), -127, dtype=torch.int8)
    ones_a, ones_b = torch.ones(3), torch.full((40,), 1e-3)
    out = gemm_int8(a, ones_a, b, ones_b)
    assert relative_error(out, reference_gemm_int8(a, ones_a, b, ones_b)) < TOL


def test_rejects_bad_inputs(gen):
    a, a_s, b, b_s = _operands(4, 32, 64, gen)
    with pytest.raises(ValueError, match="b_int8 must have dtype int8"):
        gemm_int8(a, a_s, b.float(), b_s)
    with pytest.raises(ValueError, match=r"a_scales must have shape \(4,\) \[M\] \(one per token\)"):
        gemm_int8(a, a_s[:2], b, b_s)
    with pytest.raises(ValueError, match=r"b_scales must have shape \(32,\)"):
        gemm_int8(a, a_s, b, b_s[:-1])
    with pytest.raises(ValueError, match="K must match"):
        gemm_int8(a, a_s, b[:, :32], b_s)
