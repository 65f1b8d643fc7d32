"""The bf16 store error the kernel tolerances are sized from (`kernels.common.bf16_store_rounding`)."""
import torch
import triton
import triton.language as tl

from kernels.common import bf16_store_rounding


@triton.jit
def _store_bf16(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=i < n).to(tl.bfloat16), mask=i < n)


def test_bf16_store_error_stays_within_the_stated_bound(gen):
    """Storing fp32 as bf16 errs by at most `bf16_store_rounding()` relative, and the bound is not slack (the
    largest error exceeds half of it): under the interpreter a value just below a bf16 step is truncated
    (18.1149 -> 18.0, where round-to-nearest gives 18.125)."""
    x = torch.cat([torch.tensor([18.1149, -5.7147]), torch.randn(1022, generator=gen) * 100])
    y = torch.empty(x.shape, dtype=torch.bfloat16)
    _store_bf16[(1,)](x, y, x.numel(), BLOCK=1024)
    rel = ((y.double() - x.double()).abs() / x.double().abs()).max().item()
    assert rel <= bf16_store_rounding()
    assert rel > bf16_store_rounding() / 2
