"""moe_grouped_gemm (bf16 and FP8-block) and the routing sort, under the Triton interpreter."""
import pytest
import torch

from kernels.common import bf16_store_rounding, relative_error
from kernels.moe_grouped import (moe_grouped_gemm, moe_grouped_gemm_fp8_block, reference_moe_grouped_gemm,
                                 sort_tokens_by_expert)
from kernels.quant import quantize_fp8_block128_act, quantize_fp8_block128_weight

# bf16 operands are exact in the fp32 dot, fp8 products are exact and promoted in fp32 per 128-wide group; the
# error is storing the output as bf16, `bf16_store_rounding()` relative per element (2^-8 on a GPU, 2^-7 under the
# truncating interpreter, where a 1-token case once measured 5.2e-3). A row given the wrong expert's weights, or
# left unwritten (NaN), is an O(1) error.
TOL = 1.28 * bf16_store_rounding()


def _routing(num_tokens, top_k, num_experts, gen, skew=False):
    """top_k distinct experts per token; `skew` sends every token to the same few experts (very uneven load)."""
    if skew:
        return torch.arange(top_k).repeat(num_tokens, 1)
    scores = torch.rand(num_tokens, num_experts, generator=gen)
    return scores.topk(top_k, dim=1).indices


def test_sort_tokens_by_expert_deepseek_v3_routing(gen):
    num_tokens, top_k, num_experts = 37, 8, 256  # DeepSeek-V3: 256 routed experts, top-8
    ids = _routing(num_tokens, top_k, num_experts, gen)
    token_index, sorted_slot, offsets = sort_tokens_by_expert(ids, num_experts)
    assert offsets.dtype == torch.int32 and offsets.shape == (num_experts + 1,)
    assert offsets[0] == 0 and offsets[-1] == num_tokens * top_k
    assert torch.equal(torch.bincount(token_index, minlength=num_tokens), torch.full((num_tokens,), top_k))
    flat = ids.reshape(-1)
    for e in range(num_experts):
        rows = slice(int(offsets[e]), int(offsets[e + 1]))
        assert (flat[sorted_slot[rows]] == e).all()
        assert (token_index[rows].diff() > 0).all()  # stable: token order kept inside an expert
    assert torch.equal(token_index, sorted_slot // top_k)


def test_sort_rejects_out_of_range_ids():
    with pytest.raises(ValueError, match=r"topk_ids must lie in \[0, 4\)"):
        sort_tokens_by_expert(torch.tensor([[0, 4]]), 4)


# (tokens, top_k, experts, N, K, skew): balanced, DeepSeek-V3 routing (most of 256 experts empty), and very
# uneven loads (all rows on top_k experts, > one 16-row interpreter tile each); N and K not multiples of tiles
CASES = [(5, 2, 8, 40, 70, False), (12, 8, 256, 32, 64, False), (20, 2, 4, 50, 130, True), (1, 1, 3, 16, 32, False)]


@pytest.mark.parametrize("num_tokens,top_k,num_experts,n,k,skew", CASES)
def test_bf16_matches_reference(num_tokens, top_k, num_experts, n, k, skew, gen):
    token_index, _, offsets = sort_tokens_by_expert(_routing(num_tokens, top_k, num_experts, gen, skew), num_experts)
    x_sorted = torch.randn(num_tokens, k, generator=gen).to(torch.bfloat16)[token_index]
    w = torch.randn(num_experts, n, k, generator=gen).to(torch.bfloat16)
    out = torch.full((x_sorted.shape[0], n), float("nan"), dtype=torch.bfloat16)
    moe_grouped_gemm(x_sorted, w, offsets, out=out)
    err = relative_error(out, reference_moe_grouped_gemm(x_sorted, w, offsets))
    assert err < TOL, f"rel err {err:.2e} (seed {gen.initial_seed()})"


@pytest.mark.parametrize("num_tokens,top_k,num_experts,n,k,skew", CASES)
def test_fp8_block_matches_reference(num_tokens, top_k, num_experts, n, k, skew, gen):
    token_index, _, offsets = sort_tokens_by_expert(_routing(num_tokens, top_k, num_experts, gen, skew), num_experts)
    x_fp8, x_scales = quantize_fp8_block128_act(torch.randn(num_tokens, k, generator=gen)[token_index])
    w_fp8, w_scales = quantize_fp8_block128_weight(torch.randn(num_experts, n, k, generator=gen))
    out = torch.full((x_fp8.shape[0], n), float("nan"), dtype=torch.bfloat16)
    moe_grouped_gemm_fp8_block(x_fp8, x_scales, w_fp8, w_scales, offsets, out=out)
    err = relative_error(out, reference_moe_grouped_gemm(x_fp8, w_fp8, offsets, x_scales, w_scales))
    assert err < TOL, f"rel err {err:.2e} (seed {gen.initial_seed()})"


def test_rejects_bad_inputs(gen):
    x = torch.randn(6, 32, generator=gen).to(torch.bfloat16)
    w = torch.randn(3, 16, 32, generator=gen).to(torch.bfloat16)
    offsets = torch.tensor([0, 2, 2, 6], dtype=torch.int32)
    with pytest.raises(ValueError, match=r"expert_offsets must have shape \(4,\) \[E\+1\]"):
        moe_grouped_gemm(x, w, offsets[:3])
    with pytest.raises(ValueError, match="K must match"):
        moe_grouped_gemm(x[:, :16], w, offsets)
    with pytest.raises(ValueError, match="w must have dtype bfloat16"):
        moe_grouped_gemm(x, w.float(), offsets)
    x_fp8, x_s = quantize_fp8_block128_act(x.float())
    w_fp8, w_s = quantize_fp8_block128_weight(w.float())
    with pytest.raises(ValueError, match=r"w_scales must have shape \(3, 1, 1\)"):
        moe_grouped_gemm_fp8_block(x_fp8, x_s, w_fp8, w_s[:2], offsets)
