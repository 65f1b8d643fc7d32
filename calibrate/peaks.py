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

from calibrate.control import BudgetReached, Interrupted
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


def _matmul_size(fmt: str, max_n: int, device: torch.device, launch_cap_s: float, check: Callable[[], None]) -> int:
    """The largest n <= max_n (a multiple of 128, at least 256) whose n^3 product should take about
    `launch_cap_s` per launch, scaled from one timed launch at n = 256 (FLOPs grow as n^3)."""
    import time

    bench = _matmul_bench(fmt, 256, device)
    inputs = bench.make_inputs()
    check()
    bench.run(inputs)  # warm-up (library dispatch, JIT)
    check()
    t0 = time.perf_counter()
    bench.run(inputs)
    if device.type == "cuda":
        torch.cuda.synchronize()
    probe_s = max(time.perf_counter() - t0, 1e-9)
    n = int(256 * (launch_cap_s / probe_s) ** (1 / 3)) // 128 * 128
    return max(256, min(max_n, n))


def measure_ceilings(device: torch.device, time_fn: Callable[[Bench], float], matmul_n: int, copy_bytes: int,
                     formats: tuple[str, ...], *, measured: dict | None = None, launch_cap_s: float = 0.1,
                     check: Callable[[], None] = lambda: None,
                     on_step: Callable[[str], None] = lambda what: None) -> dict:
    """Measured {flops_per_s: {format: rate}, mem_bytes_per_s, matmul_n: {format: n}, copy_bytes, errors,
    not_measured}, filled into `measured` in place (so a stop keeps what was done; a later call measures only
    what is in `not_measured`). A format whose product fails is left out with its error.

    `time_fn(bench)` returns seconds per launch. Matmul FLOPs 2n^3 with n at most `matmul_n`, smaller where one
    launch would exceed `launch_cap_s` (see `_matmul_size`); the copy moves `copy_bytes` read + written. `check()`
    raises to stop (a signal, or the stage's deadline): what is not measured then stays in `not_measured`.
    """
    m = measured if measured is not None else {}
    m.setdefault("flops_per_s", {})
    m.setdefault("mem_bytes_per_s", None)
    m.setdefault("errors", {})
    m.setdefault("copy_bytes", copy_bytes)
    if not isinstance(m.get("matmul_n"), dict):
        m["matmul_n"] = {}
    m.setdefault("not_measured", ["mem", *formats])
    m["launch_cap_s"] = launch_cap_s
    for what in list(m["not_measured"]):
        check()
        on_step(what)
        if what == "mem":
            n = copy_bytes // 4
            copy = Bench(lambda: (torch.empty(n, dtype=torch.float32, device=device),
                                  torch.ones(n, dtype=torch.float32, device=device)), lambda a: a[0].copy_(a[1]),
                         8.0 * n)
            m["mem_bytes_per_s"] = 2.0 * n * 4 / time_fn(copy)
        else:
            try:
                size = _matmul_size(what, matmul_n, device, launch_cap_s, check)
                t = time_fn(_matmul_bench(what, size, device))
                m["flops_per_s"][what], m["matmul_n"][what] = 2.0 * size ** 3 / t, size
            except Exception as err:  # format not supported by this device/library: keep the datasheet figure
                if isinstance(err, (Interrupted, BudgetReached)):
                    raise
                m["errors"][what] = f"{type(err).__name__}: {str(err).splitlines()[0][:160] if str(err) else ''}"
        m["not_measured"].remove(what)
    return m


def peaks_used(datasheet: dict, measured: dict | None) -> dict:
    """Measured ceilings where present, datasheet figures elsewhere; `source` says which per figure."""
    if measured is None:
        return {**datasheet, "source": {f: "datasheet" for f in (*datasheet["flops_per_s"], "mem")}}
    flops = {f: measured["flops_per_s"].get(f, v) for f, v in datasheet["flops_per_s"].items()}
    source = {f: ("measured" if f in measured["flops_per_s"] else "datasheet") for f in datasheet["flops_per_s"]}
    mem = measured.get("mem_bytes_per_s")
    return {"flops_per_s": flops, "mem_bytes_per_s": mem or datasheet["mem_bytes_per_s"],
            "source": source | {"mem": "measured" if mem else "datasheet"}}
