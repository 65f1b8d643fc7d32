"""attn_prefill (varlen causal flash attention, GQA, cached prefix) under the Triton interpreter."""
import pytest
import torch
import torch.nn.functional as F

from kernels.attn_prefill import attn_prefill, reference_attn_prefill
from kernels.common import bf16_store_rounding, interpreting, relative_error

# Under the interpreter both dots run in fp32 (error ~1e-6) and only the bf16 output store remains (truncation
# there, < 2^-7 relative per element). On a GPU the output rounds to nearest (2^-8) and P is also rounded to bf16
# before the PV dot, another 2^-8.
# A key off by one in the causal mask shifts rows by ~1/len_k of their weight, ~1e-2 at these lengths.
TOL = 1.28 * (bf16_store_rounding() if interpreting() else 2 * bf16_store_rounding())


def _cu(lengths):
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)


def _qkv(lens_q, lens_k, hq, hkv, d, gen):
    q = torch.randn(sum(lens_q), hq, d, generator=gen).to(torch.bfloat16)
    k = torch.randn(sum(lens_k), hkv, d, generator=gen).to(torch.bfloat16)
    v = torch.randn(sum(lens_k), hkv, d, generator=gen).to(torch.bfloat16)
    return q, k, v


# (lens_q, lens_k, Hq, Hkv, D, causal): varlen with lengths off the 16-row interpreter tiles, GQA 2:1 and 4:1,
# a cached prefix (more keys than queries), non-causal, a single token, head dims 64 and 128
CASES = [
    ([5, 17, 33], [5, 17, 33], 4, 2, 64, True),
    ([7, 20], [30, 20], 4, 1, 128, True),
    ([9, 40], [13, 41], 2, 2, 64, False),
    ([1], [1], 2, 1, 64, True),
    ([16], [50], 2, 2, 128, True),
]


@pytest.mark.parametrize("lens_q,lens_k,hq,hkv,d,causal", CASES)
def test_matches_reference(lens_q, lens_k, hq, hkv, d, causal, gen):
    q, k, v = _qkv(lens_q, lens_k, hq, hkv, d, gen)
    out = torch.full_like(q, float("nan"))
    attn_prefill(q, k, v, _cu(lens_q), _cu(lens_k), causal=causal, out=out)
    err = relative_error(out, reference_attn_prefill(q, k, v, _cu(lens_q), _cu(lens_k), causal=causal))
    assert err < TOL, f"rel err {err:.2e} (seed {gen.initial_seed()})"


def test_reference_agrees_with_sdpa(gen):
    # the reference's causal mask, for equal lengths, is torch's is_causal mask (same GQA head mapping)
    q, k, v = _qkv([12], [12], 4, 2, 64, gen)
    ref = reference_attn_prefill(q, k, v, _cu([12]), _cu([12]))
    expect = F.scaled_dot_product_attention(q.double().transpose(0, 1), k.double().transpose(0, 1).repeat_interleave(
        2, 0), v.double().transpose(0, 1).repeat_interleave(2, 0), is_causal=True).transpose(0, 1)
    assert relative_error(ref, expect) < 1e-12


def test_max_seqlen_given_and_sm_scale(gen):
    q, k, v = _qkv([3, 18], [3, 18], 2, 2, 64, gen)
    out = attn_prefill(q, k, v, _cu([3, 18]), _cu([3, 18]), max_seqlen_q=18, sm_scale=0.05)
    ref = reference_attn_prefill(q, k, v, _cu([3, 18]), _cu([3, 18]), sm_scale=0.05)
    assert relative_error(out, ref) < TOL


def test_rejects_bad_inputs(gen):
    q, k, v = _qkv([4], [4], 4, 2, 64, gen)
    cu = _cu([4])
    with pytest.raises(ValueError, match="head dim must be 64 or 128"):
        attn_prefill(q[..., :32], k[..., :32], v[..., :32], cu, cu)
    with pytest.raises(ValueError, match=r"query heads \(4\) must be a multiple of KV heads \(3\)"):
        attn_prefill(q, k.repeat(1, 2, 1)[:, :3], v.repeat(1, 2, 1)[:, :3], cu, cu)
    with pytest.raises(ValueError, match="k must have dtype bfloat16"):
        attn_prefill(q, k.half(), v, cu, cu)
    with pytest.raises(ValueError, match="cu_seqlens_q must have dtype int32"):
        attn_prefill(q, k, v, cu.long(), cu)
