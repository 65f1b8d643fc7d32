"""gemm_fp8_block against its float64 reference, under the Triton interpreter."""
import pytest
import torch

from kernels.common import bf16_store_rounding, relative_error
from kernels.gemm_fp8_block import gemm_fp8_block, reference_gemm_fp8_block
from kernels.quant import quantize_fp8_block128_act, quantize_fp8_block128_weight

# The fp8 products are exact in fp32 and each 128-term partial sum is accumulated in fp32 (error ~1e-6); the only
# real error is storing C as bf16, at most `bf16_store_rounding()` relative per element (2^-8 on a GPU, 2^-7 under
# the truncating interpreter), so ||C - ref|| / ||ref|| stays below it. A wrong scale, a dropped K tile or an
# unwritten (NaN) element each gives an error of order 1.
TOL = 1.28 * bf16_store_rounding()


def _operands(m, n, k, gen):
    a = torch.randn(m, k, generator=gen) * 2
    b = torch.randn(n, k, generator=gen)
    return (*quantize_fp8_block128_act(a), *quantize_fp8_block128_weight(b))


# sizes straddle the 32x32 interpreter tiles, the 128-wide K groups and the 128-row B blocks
@pytest.mark.parametrize("m,n,k", [(1, 64, 128), (37, 45, 300), (70, 130, 256), (16, 160, 129)])
def test_matches_reference(m, n, k, gen):
    a, a_s, b, b_s = _operands(m, n, k, gen)
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16)  # poisoned: unwritten elements fail
    gemm_fp8_block(a, a_s, b, b_s, out=out)
    err = relative_error(out, reference_gemm_fp8_block(a, a_s, b, b_s))
    assert err < TOL, f"rel err {err:.2e} (seed {gen.initial_seed()})"


def test_allocates_output_when_none_given(gen):
    a, a_s, b, b_s = _operands(5, 40, 128, gen)
    out = gemm_fp8_block(a, a_s, b, b_s)
    assert out.shape == (5, 40) and out.dtype == torch.bfloat16
    assert relative_error(out, reference_gemm_fp8_block(a, a_s, b, b_s)) < TOL


def test_rejects_bad_inputs(gen):
    a, a_s, b, b_s = _operands(4, 32, 256, gen)
    with pytest.raises(ValueError, match="a_fp8 must have dtype float8_e4m3fn"):
        gemm_fp8_block(a.float(), a_s, b, b_s)
    with pytest.raises(ValueError, match="K must match"):
        gemm_fp8_block(a, a_s, b[:, :128], b_s)
    with pytest.raises(ValueError, match=r"a_scales must have shape \(4, 2\) \[M, ceil\(K/128\)\]"):
        gemm_fp8_block(a, a_s[:, :1], b, b_s)
    with pytest.raises(ValueError, match=r"b_scales must have shape \(1, 2\)"):
        gemm_fp8_block(a, a_s, b, b_s.t())
    with pytest.raises(ValueError, match="out must be a contiguous bfloat16"):
        gemm_fp8_block(a, a_s, b, b_s, out=torch.empty(4, 32))
