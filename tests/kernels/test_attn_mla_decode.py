"""attn_mla_decode (DeepSeek MLA, absorbed, latent 512 + rope 64) under the Triton interpreter."""
import pytest
import torch

from kernels.attn_mla_decode import attn_mla_decode, reference_attn_mla_decode
from kernels.common import bf16_store_rounding, interpreting, relative_error

# As for paged decode: fp32 dots under the interpreter leave the bf16 output store (truncation there, < 2^-7
# relative); on a GPU the output rounding (2^-8) and the bf16 P before the PV dot (another 2^-8). 1e-2 either way.
TOL = 1.28 * (bf16_store_rounding() if interpreting() else 2 * bf16_store_rounding())


def _paged(context_lens, page_size, dim, gen):
    b = len(context_lens)
    max_pages = max(-(-c // page_size) for c in context_lens) + 1
    num_blocks = b * max_pages + 2
    cache = torch.randn(num_blocks, page_size, dim, generator=gen).to(torch.bfloat16)
    table = torch.randperm(num_blocks, generator=gen)[: b * max_pages].reshape(b, max_pages).to(torch.int32)
    return cache, table


# (context lens, heads, block size or None for a contiguous cache, splits): heads below, off and at the
# 16-head interpreter tile, 128 heads as in DeepSeek-V3, an empty context, forced split-KV
CASES = [
    ([1, 17, 40], 4, 16, None),
    ([0, 33, 70], 20, 64, 3),
    ([50, 5], 16, None, 2),
    ([24], 128, 64, 1),
]


@pytest.mark.parametrize("context_lens,heads,page_size,splits", CASES)
def test_matches_reference(context_lens, heads, page_size, splits, gen):
    b = len(context_lens)
    q = (torch.randn(b, heads, 576, generator=gen) * 0.3).to(torch.bfloat16)
    if page_size is None:
        cache, table = torch.randn(b, 72, 576, generator=gen).to(torch.bfloat16), None
    else:
        cache, table = _paged(context_lens, page_size, 576, gen)
    lens = torch.tensor(context_lens, dtype=torch.int32)
    out = torch.full((b, heads, 512), float("nan"), dtype=torch.bfloat16)
    attn_mla_decode(q, cache, lens, table, num_splits=splits, out=out)
    err = relative_error(out, reference_attn_mla_decode(q, cache, lens, table))
    assert err < TOL, f"rel err {err:.2e} (seed {gen.initial_seed()})"


def test_other_latent_sizes(gen):
    # the ranks are constexprs: a smaller model (rank 128 + rope 32) works the same way
    cache, table = _paged([9, 30], 16, 160, gen)
    q = torch.randn(2, 8, 160, generator=gen).to(torch.bfloat16)
    lens = torch.tensor([9, 30], dtype=torch.int32)
    out = attn_mla_decode(q, cache, lens, table, kv_lora_rank=128, sm_scale=0.1)
    ref = reference_attn_mla_decode(q, cache, lens, table, kv_lora_rank=128, sm_scale=0.1)
    assert relative_error(out, ref) < TOL


def test_rejects_bad_inputs(gen):
    cache, table = _paged([5, 9], 16, 576, gen)
    q = torch.randn(2, 4, 576, generator=gen).to(torch.bfloat16)
    lens = torch.tensor([5, 9], dtype=torch.int32)
    with pytest.raises(ValueError, match="both powers of two"):
        attn_mla_decode(q, cache, lens, table, kv_lora_rank=500)
    with pytest.raises(ValueError, match="kv_cache's last dim must equal q's"):
        attn_mla_decode(q, cache[..., :512], lens, table)
    with pytest.raises(ValueError, match="kv_cache must have dtype bfloat16"):
        attn_mla_decode(q, cache.float(), lens, table)
    with pytest.raises(ValueError, match="need B = 2"):
        attn_mla_decode(q, cache, lens[:1], table)
