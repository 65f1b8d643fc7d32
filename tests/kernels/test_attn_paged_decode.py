"""attn_paged_decode (paged KV, GQA, bf16 and FP8 KV, split-KV) under the Triton interpreter."""
import pytest
import torch

from kernels.attn_paged_decode import attn_paged_decode, reference_attn_paged_decode
from kernels.common import bf16_store_rounding, interpreting, relative_error

# Interpreter: fp32 dots, so the bf16 output store (truncation there, < 2^-7 relative) dominates, also through the
# fp32 split-KV merge. GPU: output rounding 2^-8, and P is rounded to bf16 before the PV dot, another 2^-8. The FP8 cache is compared with
# the reference on the same e4m3 codes, so quantization error is not part of it.
TOL = 1.28 * (bf16_store_rounding() if interpreting() else 2 * bf16_store_rounding())


def _cache(context_lens, page_size, hkv, d, fp8, gen):
    """Random caches with pages scattered through a larger pool, and a block table one page longer than needed."""
    b = len(context_lens)
    max_pages = max(-(-c // page_size) for c in context_lens) + 1
    num_blocks = b * max_pages + 3
    k = torch.randn(num_blocks, page_size, hkv, d, generator=gen)
    v = torch.randn(num_blocks, page_size, hkv, d, generator=gen)
    k_scale = v_scale = 1.0
    if fp8:
        k_scale, v_scale = 0.02, 0.03
        # clamped to the e4m3 range: torch's cast turns out-of-range values into NaN
        k = (k / k_scale).clamp(-448, 448).to(torch.float8_e4m3fn)
        v = (v / v_scale).clamp(-448, 448).to(torch.float8_e4m3fn)
    else:
        k, v = k.to(torch.bfloat16), v.to(torch.bfloat16)
    table = torch.randperm(num_blocks, generator=gen)[: b * max_pages].reshape(b, max_pages).to(torch.int32)
    return k, v, table, torch.tensor(context_lens, dtype=torch.int32), k_scale, v_scale


# (context lens, Hq, Hkv, D, block size, fp8, splits): lengths off the 16-token tiles and page sizes, an empty
# context, GQA 1:1 to 8:1, block sizes 16 and 64, forced split-KV including more splits than tiles
CASES = [
    ([1, 17, 40], 8, 2, 64, 16, False, None),
    ([0, 33, 70], 4, 4, 128, 64, True, 3),
    ([100, 5], 8, 1, 64, 16, False, 4),
    ([20], 2, 1, 128, 16, True, 7),
]


@pytest.mark.parametrize("context_lens,hq,hkv,d,page_size,fp8,splits", CASES)
def test_matches_reference(context_lens, hq, hkv, d, page_size, fp8, splits, gen):
    k, v, table, lens, k_scale, v_scale = _cache(context_lens, page_size, hkv, d, fp8, gen)
    q = torch.randn(len(context_lens), hq, d, generator=gen).to(torch.bfloat16)
    out = torch.full_like(q, float("nan"))
    attn_paged_decode(q, k, v, table, lens, k_scale=k_scale, v_scale=v_scale, num_splits=splits, out=out)
    ref = reference_attn_paged_decode(q, k, v, table, lens, k_scale=k_scale, v_scale=v_scale)
    err = relative_error(out, ref)
    assert err < TOL, f"rel err {err:.2e} (seed {gen.initial_seed()})"


def test_empty_context_gives_zeros(gen):
    k, v, table, lens, _, _ = _cache([0, 3], 16, 1, 64, False, gen)
    q = torch.randn(2, 2, 64, generator=gen).to(torch.bfloat16)
    for splits in (1, 2):
        out = attn_paged_decode(q, k, v, table, lens, num_splits=splits)
        assert torch.equal(out[0], torch.zeros_like(out[0]))


def test_rejects_bad_inputs(gen):
    k, v, table, lens, _, _ = _cache([5, 9], 16, 2, 64, False, gen)
    q = torch.randn(2, 4, 64, generator=gen).to(torch.bfloat16)
    with pytest.raises(ValueError, match="block_size must be 16, 32, 64 or 128, got 8"):
        attn_paged_decode(q, k[:, :8], v[:, :8], table, lens)
    with pytest.raises(ValueError, match="k_cache must have dtype bfloat16 or float8_e4m3fn"):
        attn_paged_decode(q, k.float(), v.float(), table, lens)
    with pytest.raises(ValueError, match="need B = 2"):
        attn_paged_decode(q, k, v, table[:1], lens)
    with pytest.raises(ValueError, match="block_table must have dtype int32"):
        attn_paged_decode(q, k, v, table.long(), lens)
    with pytest.raises(ValueError, match="head dim must be 64, 128 or 256"):
        attn_paged_decode(q[..., :32], k[..., :32], v[..., :32], table, lens)
