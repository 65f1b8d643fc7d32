"""Our calls of the Triton kernels (`calibrate.cuda_ops`) match each kernel's own reference, under the interpreter."""
from __future__ import annotations

import torch

from calibrate.adapter_check import check_adapters
from calibrate.cuda_ops import BUILDERS


def test_every_kernel_adapter_matches_its_reference():
    rows = check_adapters(torch.device("cpu"), toy=True)
    assert {r["impl"] for r in rows} == set(BUILDERS)
    bad = [r for r in rows if not r["ok"]]
    assert not bad, bad
