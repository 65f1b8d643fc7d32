"""Every kernel at every autotune config compiles for Hopper (sm_90) without register spills and within the
227 KB shared-memory limit: the interpreter never runs the compiler, so this is the only check of that path."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # about 90 s: every autotune config through the sm_90 compiler

REPO = Path(__file__).resolve().parents[2]


def test_all_configs_compile_for_sm90_without_spills():
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    proc = subprocess.run([sys.executable, "-m", "kernels.compile_check"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=280)
    report = proc.stdout + proc.stderr
    assert proc.returncode == 0, report[-4000:]
    assert report.rstrip().endswith("0 bad"), report[-2000:]
    # the tensor-core path: Hopper wgmma on 64- and 128-row tiles, for GEMMs and prefill attention
    for kernel in ("gemm_fp8_block", "gemm_int8", "gemm_int4_wo", "moe_grouped", "attn_prefill"):
        assert any(line.startswith(kernel) and " wgmma " in line for line in report.splitlines()), kernel
