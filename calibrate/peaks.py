"""The peaks a profile's roofline axis uses: datasheet figures, or ceilings measured on the device at hand.

A measured ceiling is the rate a large, well-shaped op reaches: a big matrix product per compute format and a
large device-to-device copy (bytes read + written). Over measured ceilings the roofline sits where the device
really is, so the compute/memory crossover of `max(flops/peak, bytes/bandwidth)` falls in the right place (a VM's
share of a CPU socket, or a GPU's achievable clock, can be far from the datasheet). Formats that cannot be
measured on the device (FP8 on a CPU) keep the datasheet figure. Both sets go into the profile's metadata.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from calibrate.torch_ops import Bench, rand, rand_int8
from inferplan.specs import HardwareSpec

FORMATS = ("bf16", "fp8", "int8", "fp32")


def datasheet_peaks(hw: HardwareSpec) -> dict:
    return {"flops_per_s": {f: hw.peak_for(f) for f in FORMATS}, "mem_bytes_per_s": hw.mem_bandwidth_bytes_per_s}


def _matmul_bench(fmt: str, n: int, device: torch.device) -> Bench:
    if fmt in ("bf16", "fp32"):
        dt = torch.bfloat16 if fmt == "bf16" else torch.float32
        return Bench(lambda: (rand((n, n), dt, device), rand((n, n), dt, device)), lambda a: a[0] @ a[1],
                     2.0 * n * n * dt.itemsize)
    if fmt == "int8":
        return Bench(lambda: (rand_int8((n, n), device), rand_int8((n, n), device).t()),
                     lambda a: torch._int_mm(a[0], a[1]), 2.0 * n * n)
    if fmt == "fp8":
        one = torch.ones((), device=device)
        f8 = torch.float8_e4m3fn
        return Bench(lambda: (rand((n, n), f8, device, 64.0), rand((n, n), f8, device, 64.0).t()),
                     lambda a: torch._scaled_mm(a[0], a[1], scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
                     2.0 * n * n)
    raise ValueError(fmt)


def measure_ceilings(device: torch.device, time_fn: Callable[[Bench], float], matmul_n: int, copy_bytes: int,
                     formats: tuple[str, ...]) -> dict:
    """Measured {flops_per_s: {format: rate}, mem_bytes_per_s: rate}; a format whose product fails is left out.

    `time_fn(bench)` returns seconds per launch. Matmul FLOPs 2n^3; the copy moves `copy_bytes` read + written.
    """
    flops: dict[str, float] = {}
    errors: dict[str, str] = {}
    for fmt in formats:
        try:
            t = time_fn(_matmul_bench(fmt, matmul_n, device))
            flops[fmt] = 2.0 * matmul_n ** 3 / t
        except Exception as err:  # format not supported by this device/library: keep the datasheet figure
            errors[fmt] = f"{type(err).__name__}: {str(err).splitlines()[0][:160] if str(err) else ''}"
    n = copy_bytes // 4
    copy = Bench(lambda: (torch.empty(n, dtype=torch.float32, device=device),
                          torch.ones(n, dtype=torch.float32, device=device)), lambda a: a[0].copy_(a[1]), 8.0 * n)
    return {"flops_per_s": flops, "mem_bytes_per_s": 2.0 * n * 4 / time_fn(copy), "matmul_n": matmul_n,
            "copy_bytes": 2 * n * 4, "errors": errors}


def peaks_used(datasheet: dict, measured: dict | None) -> dict:
    """Measured ceilings where present, datasheet figures elsewhere; `source` says which per figure."""
    if measured is None:
        return {**datasheet, "source": {f: "datasheet" for f in (*datasheet["flops_per_s"], "mem")}}
    flops = {f: measured["flops_per_s"].get(f, v) for f, v in datasheet["flops_per_s"].items()}
    source = {f: ("measured" if f in measured["flops_per_s"] else "datasheet") for f in datasheet["flops_per_s"]}
    return {"flops_per_s": flops, "mem_bytes_per_s": measured["mem_bytes_per_s"],
            "source": source | {"mem": "measured"}}
