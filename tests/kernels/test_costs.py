"""FLOP and byte formulas in kernels.costs against brute-force counts and hand sums."""
import pytest
import torch

from kernels import costs


@pytest.mark.parametrize("len_q,len_k", [(1, 1), (5, 5), (3, 10), (10, 4), (7, 0)])
@pytest.mark.parametrize("causal", [True, False])
def test_attended_pairs_matches_the_mask(len_q, len_k, causal):
    rows = torch.arange(len_q)[:, None] + (len_k - len_q)
    mask = torch.arange(len_k)[None, :] <= rows if causal else torch.ones(len_q, len_k, dtype=torch.bool)
    assert costs.attended_pairs(len_q, len_k, causal) == int(mask.sum())


def test_gemm_counts_by_hand():
    assert costs.flops_gemm(2, 3, 4) == 48
    assert costs.bytes_gemm_bf16(2, 3, 4) == 2 * (8 + 12 + 6)
    # fp8: 1 byte per A and B element, fp32 scales [2, 1] and [1, 1], bf16 C
    assert costs.bytes_gemm_fp8_block(2, 3, 4) == 8 + 12 + 4 * (2 + 1) + 2 * 6
    assert costs.bytes_gemm_int8(2, 3, 4) == 8 + 12 + 4 * (2 + 3) + 2 * 6
    # int4: half a byte per weight (K=4 -> 2 bytes per column), one bf16 scale per column and group
    assert costs.bytes_gemm_int4_wo(2, 3, 4, group_size=128) == 2 * 8 + 2 * 3 + 2 * 3 + 2 * 6
    assert costs.bytes_gemm_int4_wo(2, 3, 4, 128, symmetric=False) == 2 * 8 + 2 * 3 + 4 * 3 + 2 * 6


def test_moe_counts_only_active_experts():
    assert costs.flops_moe_grouped(10, 3, 4) == 2 * 10 * 3 * 4
    assert costs.bytes_moe_grouped_bf16(10, 3, 4, 2) == 2 * (40 + 30 + 2 * 12)
    assert costs.bytes_moe_grouped_fp8_block(10, 3, 4, 2) == 40 + 4 * 10 + 2 * (12 + 4) + 2 * 30


def test_attention_counts():
    # causal prefill, one sequence of 4: 1+2+3+4 = 10 pairs; 2 heads of dim 8
    assert costs.flops_attn_prefill([4], [4], 2, 8) == 4 * 8 * 2 * 10
    assert costs.bytes_attn_prefill([4], [6], 4, 2, 8) == 2 * 8 * (2 * 4 * 4 + 2 * 2 * 6)
    assert costs.flops_attn_decode([3, 5], 4, 8) == 4 * 8 * 4 * 8
    kv = 2 * 1 * 2 * 8 * 8  # fp8 K and V: 8 tokens, 2 KV heads, dim 8
    assert costs.bytes_attn_paged_decode([3, 5], 4, 2, 8, page_size=4, kv_bytes_per_elem=1) == \
        kv + 4 * (1 + 2) + 2 * 2 * 2 * 4 * 8
    assert costs.flops_attn_mla_decode([10], 128) == 2 * 128 * (1024 + 64) * 10
    assert costs.bytes_attn_mla_decode([10], 128, page_size=64) == 2 * 576 * 10 + 4 + 2 * 128 * (1024 + 64)
