"""Formats in kernels.quant: layouts match their docstrings, and round trips stay within each format's step."""
import pytest
import torch

from kernels.quant import (FP8_E4M3_MAX, dequantize_fp8_block128_act, dequantize_fp8_block128_weight,
                           dequantize_int4_wo, dequantize_int8_rows, pack_int4_k_pairs, quantize_fp8_block128_act,
                           quantize_fp8_block128_weight, quantize_int4_wo, quantize_int4_wo_g128,
                           quantize_int8_per_channel, quantize_int8_per_token, unpack_int4_k_pairs)


def _rel(x: torch.Tensor, ref: torch.Tensor) -> float:
    return ((x.double() - ref.double()).norm() / ref.double().norm()).item()


@pytest.mark.parametrize("shape", [(1, 128), (7, 300), (130, 257)])
def test_fp8_block128_act_layout_and_round_trip(shape, gen):
    a = torch.randn(shape, generator=gen) * 3
    q, scales = quantize_fp8_block128_act(a)
    assert q.dtype == torch.float8_e4m3fn and scales.dtype == torch.float32
    assert scales.shape == (shape[0], -(-shape[1] // 128))
    # each 1x128 group's largest magnitude maps to exactly +-448
    group_max = torch.nn.functional.pad(q.float().abs(), (0, (-shape[1]) % 128)).reshape(shape[0], -1, 128).amax(-1)
    assert torch.equal(group_max, torch.full_like(group_max, FP8_E4M3_MAX)), f"seed {gen.initial_seed()}"
    # e4m3 keeps 3 mantissa bits: every normal value rounds within 2^-4 relative, so the norm ratio is < 2^-4
    assert _rel(dequantize_fp8_block128_act(q, scales), a) < 2 ** -4, f"seed {gen.initial_seed()}"


@pytest.mark.parametrize("shape", [(128, 128), (3, 200, 130)])
def test_fp8_block128_weight_scales_per_128x128_block(shape, gen):
    b = torch.randn(shape, generator=gen)
    b[..., :1, :1] = 50.0  # one outlier: only its own block's scale may grow
    q, scales = quantize_fp8_block128_weight(b)
    assert scales.shape == (*shape[:-2], -(-shape[-2] // 128), -(-shape[-1] // 128))
    assert torch.allclose(scales[..., 0, 0], torch.tensor(50.0 / FP8_E4M3_MAX))
    if scales.shape[-1] > 1:
        assert (scales[..., 0, 1] < 10.0 / FP8_E4M3_MAX).all()
    assert _rel(dequantize_fp8_block128_weight(q, scales), b) < 2 ** -4


def test_int8_per_token_and_per_channel_error_within_half_a_step(gen):
    a = torch.randn(9, 70, generator=gen)
    for quantize in (quantize_int8_per_token, quantize_int8_per_channel):
        q, scales = quantize(a)
        assert q.dtype == torch.int8 and scales.shape == (9,)
        assert int(q.abs().max()) == 127
        # round-to-nearest: each element is within half a quantization step of its row
        err = (dequantize_int8_rows(q, scales) - a.double()).abs()
        assert (err <= scales.double()[:, None] / 2 * (1 + 1e-6)).all()


def test_int4_packing_layout_is_k_pairs_low_nibble_first():
    codes = torch.tensor([[1, 4], [2, 5], [3, 6]], dtype=torch.uint8)  # [K=3, N=2]
    packed = pack_int4_k_pairs(codes)
    assert packed.tolist() == [[0x21, 0x54], [0x03, 0x06]]
    assert torch.equal(unpack_int4_k_pairs(packed, 3), codes)
    with pytest.raises(ValueError, match="0..15"):
        pack_int4_k_pairs(torch.tensor([[16]], dtype=torch.uint8))


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("n,k,group", [(5, 128, 128), (33, 200, 64), (8, 96, 32)])
def test_int4_wo_round_trip_within_half_a_step(symmetric, n, k, group, gen):
    w = torch.randn(n, k, generator=gen) + (0.0 if symmetric else 0.7)
    packed, scales, zeros = quantize_int4_wo(w, symmetric, group)
    assert packed.shape == (-(-k // 2), n) and packed.dtype == torch.uint8
    assert scales.shape == (-(-k // group), n) and scales.dtype == torch.bfloat16
    assert (zeros is None) == symmetric
    step = scales.double().repeat_interleave(group, 0)[:k].t()  # [N, K]
    err = (dequantize_int4_wo(packed, scales, zeros, k, group) - w.double()).abs()
    # half a step from rounding; asymmetric groups can lose up to ~0.56 step at the top code, because the
    # bf16-rounded scale (2^-8 relative) can make the range 15 steps and a bit, and the zero point rounds too
    bound = 0.5 * (1 + 1e-3) if symmetric else 0.6
    assert (err <= bound * step).all(), f"seed {gen.initial_seed()}"


def test_int4_wo_g128_is_group_128(gen):
    w = torch.randn(4, 256, generator=gen)
    assert quantize_int4_wo_g128(w, True)[1].shape == (2, 4)
    with pytest.raises(ValueError, match="positive even"):
        quantize_int4_wo(w, True, 0)
