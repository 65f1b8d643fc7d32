"""gemm_int4_wo (W4A16) against its float64 reference, under the Triton interpreter."""
import pytest
import torch

from kernels.common import bf16_store_rounding, relative_error
from kernels.gemm_int4_wo import gemm_int4_wo, reference_gemm_int4_wo
from kernels.quant import quantize_int4_wo

# x is exact bf16 and the codes minus zero are small integers, exact in any float type; products accumulate in
# fp32 and the group scale multiplies each fp32 partial, so the only sizeable error is rounding Y to bf16
# (`bf16_store_rounding()` relative per element: 2^-8 on a GPU, 2^-7 under the truncating interpreter; also when
# split-K partials are summed in fp32 first).
TOL = 1.28 * bf16_store_rounding()


# decode-sized and odd sizes (odd K leaves half a byte), symmetric and asymmetric, with and without split-K
@pytest.mark.parametrize("m,n,k,group,symmetric,split_k", [
    (1, 64, 128, 128, True, None),
    (3, 40, 64, 32, False, 1),
    (5, 100, 301, 64, False, 3),
    (16, 72, 256, 128, True, 2),
    (33, 48, 96, 32, True, 1),
])
def test_matches_reference(m, n, k, group, symmetric, split_k, gen):
    x = torch.randn(m, k, generator=gen).to(torch.bfloat16)
    packed, scales, zeros = quantize_int4_wo(torch.randn(n, k, generator=gen), symmetric, group)
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
    gemm_int4_wo(x, packed, scales, zeros, group, out=out, split_k=split_k)
    err = relative_error(out, reference_gemm_int4_wo(x, packed, scales, zeros, group))
    assert err < TOL, f"rel err {err:.2e} (seed {gen.initial_seed()})"


def test_split_k_more_slices_than_k_steps_still_writes_zeros(gen):
    # 5 slices over 2 K steps: 3 slices get no work and must still write their (zero) partials
    x = torch.randn(2, 64, generator=gen).to(torch.bfloat16)
    packed, scales, zeros = quantize_int4_wo(torch.randn(32, 64, generator=gen), True, 32)
    out = gemm_int4_wo(x, packed, scales, zeros, 32, split_k=5)
    assert relative_error(out, reference_gemm_int4_wo(x, packed, scales, zeros, 32)) < TOL


def test_rejects_bad_inputs(gen):
    x = torch.randn(2, 128, generator=gen).to(torch.bfloat16)
    packed, scales, zeros = quantize_int4_wo(torch.randn(32, 128, generator=gen), False, 64)
    with pytest.raises(ValueError, match="x must have dtype bfloat16"):
        gemm_int4_wo(x.float(), packed, scales, zeros, 64)
    with pytest.raises(ValueError, match=r"packed must have shape \(64, 32\) \[ceil\(K/2\), N\]"):
        gemm_int4_wo(x, packed[:10], scales, zeros, 64)
    with pytest.raises(ValueError, match=r"scales must have shape \(4, 32\) \[ceil\(K/group_size\), N\]"):
        gemm_int4_wo(x, packed, scales, zeros, 32)
    with pytest.raises(ValueError, match="group_size must be a positive multiple of 32"):
        gemm_int4_wo(x, packed, scales, zeros, 48)
    with pytest.raises(ValueError, match="zeros must have shape"):
        gemm_int4_wo(x, packed, scales, zeros[:1], 64)
