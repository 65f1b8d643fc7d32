"""Check and time every kernel at real layer shapes beside library baselines; write a Parquet with provenance.

    python -m kernels.bench [--out kernels_bench.parquet] [--only gemm_int8,attn_prefill]
    TRITON_INTERPRET=1 python -m kernels.bench --quick      # toy shapes on the CPU: proves the script works

For each case (`kernels.bench_cases`): build fresh random inputs, check the kernel against its reference at full
size (fp32 on the GPU, fp64 on the CPU), then time the kernel and the first baseline that runs with
`triton.testing.do_bench` (median; do_bench zeroes a 256 MB buffer before every call, so L2 holds nothing of the
inputs). Prints TFLOP/s, GB/s, percent of the roofline (`kernels.devices` datasheet peaks) and the speedup over
the baseline; writes one row per case. Exit status: 0, or 1 when a case failed or missed its tolerance (the
Parquet is written either way), or 2 with a one-line message when there is nothing to run on.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:  # the kernel modules are imported in main(), after TRITON_INTERPRET is settled
    from kernels.bench_cases import Case
    from kernels.devices import DevicePeaks

BASELINE_ERRORS = (RuntimeError, AttributeError, NotImplementedError, TypeError, ValueError)
"""What a library baseline raises where this torch or device lacks it (e.g. `_scaled_mm` needs M % 16 == 0)."""


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m kernels.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="kernels_bench.parquet", help="Parquet output path")
    parser.add_argument("--quick", action="store_true", help="toy shapes (CPU interpreter or GPU), same code path")
    parser.add_argument("--only", default="", help="comma-separated kernel names to run (default: all)")
    return parser.parse_args(argv)


def time_ms(fn: Callable[[], object], on_gpu: bool, quick: bool) -> float:
    """Median time of one call in ms: do_bench on a GPU; on the CPU interpreter, the median of 3 timed calls."""
    if on_gpu:
        import triton.testing
        return float(triton.testing.do_bench(fn, warmup=10, rep=20 if quick else 50, return_mode="median"))
    samples = []
    for _ in range(3):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def _pick_baseline(baselines: list[tuple[str, Callable[[], object]]]) -> tuple[str, Callable[[], object] | None]:
    for name, fn in baselines:
        try:
            fn()
        except BASELINE_ERRORS:
            continue
        return name, fn
    return "", None


def run_case(case: Case, device: torch.device, peaks: DevicePeaks, quick: bool, tol: float) -> dict[str, object]:
    """Check then time one case; returns its row (without provenance)."""
    from kernels.common import relative_error
    on_gpu = device.type == "cuda"
    bound = case.build(device, torch.float32 if on_gpu else torch.float64)
    rel_err = relative_error(bound.run(), bound.reference())  # the first run also autotunes on a GPU
    t_ms = time_ms(bound.run, on_gpu, quick)
    baseline, base_fn = _pick_baseline(bound.baselines)
    base_ms = time_ms(base_fn, on_gpu, quick) if base_fn is not None else math.nan
    seconds = t_ms * 1e-3
    floor_s = max(bound.flops / peaks.flops_per_s(case.precision), bound.bytes / (peaks.hbm_gb_per_s * 1e9))
    compute_bound = bound.flops / peaks.flops_per_s(case.precision) >= bound.bytes / (peaks.hbm_gb_per_s * 1e9)
    return {
        "kernel": case.kernel, "variant": case.variant, "model": case.model, "layer": case.layer,
        **{dim: case.dims.get(dim, 0) for dim in ("m", "n", "k", "batch", "seqlen_q", "seqlen_k", "heads_q",
                                                   "heads_kv", "head_dim")},
        "flops": bound.flops, "bytes": bound.bytes, "time_ms": t_ms,
        "tflops_per_s": bound.flops / seconds / 1e12, "gb_per_s": bound.bytes / seconds / 1e9,
        "roofline_pct": 100.0 * floor_s / seconds,
        "bound": "" if math.isnan(floor_s) else ("compute" if compute_bound else "memory"),
        "precision": case.precision, "baseline": baseline, "baseline_time_ms": base_ms,
        "speedup_vs_baseline": base_ms / t_ms, "rel_err": rel_err, "correct": rel_err < tol, "error": "",
    }


def _failed_row(case: Case, message: str) -> dict[str, object]:
    nan = math.nan
    return {"kernel": case.kernel, "variant": case.variant, "model": case.model, "layer": case.layer,
            **{dim: case.dims.get(dim, 0) for dim in ("m", "n", "k", "batch", "seqlen_q", "seqlen_k", "heads_q",
                                                       "heads_kv", "head_dim")},
            "flops": 0, "bytes": 0, "time_ms": nan, "tflops_per_s": nan, "gb_per_s": nan, "roofline_pct": nan,
            "bound": "", "precision": case.precision, "baseline": "", "baseline_time_ms": nan,
            "speedup_vs_baseline": nan, "rel_err": nan, "correct": False, "error": message}


def _shape(row: dict[str, object]) -> str:
    if row["m"]:
        return f"m={row['m']} n={row['n']} k={row['k']}"
    return f"b={row['batch']} q={row['seqlen_q']} kv={row['seqlen_k']} h={row['heads_q']}/{row['heads_kv']}"


def _print_row(row: dict[str, object]) -> None:
    status = "ok" if row["correct"] else ("ERROR " + str(row["error"]) if row["error"] else "WRONG")
    print(f"{row['kernel']:<18} {row['variant']:<20} {row['model'] + ' ' + row['layer']:<28} {_shape(row):<34} "
          f"{row['time_ms']:9.4f} {row['tflops_per_s']:8.1f} {row['gb_per_s']:8.0f} {row['roofline_pct']:6.1f} "
          f"{row['speedup_vs_baseline']:6.2f}x {row['rel_err']:8.1e} {status}", flush=True)


def _write(rows: list[dict[str, object]], prov: dict[str, object], path: str) -> None:
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq
    table = pa.Table.from_pylist([{**row, **prov} for row in rows])
    table = table.replace_schema_metadata({"inferplan.kernels.bench": json.dumps(prov)})
    pq.write_table(table, path)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    on_gpu = torch.cuda.is_available()
    if not on_gpu and not args.quick:
        print("kernels.bench: no CUDA device found; run on a GPU, or use --quick (toy shapes, CPU interpreter)",
              file=sys.stderr)
        return 2
    if not on_gpu:
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before the kernel modules are imported (jit-decorated)
    from kernels.bench_cases import all_cases
    from kernels.common import interpreting
    from kernels.devices import UNKNOWN, peaks_for, provenance

    device = torch.device("cuda" if on_gpu else "cpu")
    prov = {**provenance(device), "quick": args.quick}
    peaks = peaks_for(prov["gpu_name"]) if on_gpu else UNKNOWN
    # NOTE: tolerance of the full-size check. Interpreter: fp32 dots, only the bf16 output rounding (<= 2^-8).
    # GPU: bf16 P before the PV dot in attention, and Hopper's FP8 tensor cores accumulate with ~14-bit alignment
    # inside each 128-wide K group (DeepSeek-V3 report, sec. 3.3.2): about 2^-8 more.
    tol = 5e-3 if interpreting() else 1e-2
    only = {name.strip() for name in args.only.split(",") if name.strip()}
    known = sorted({c.kernel for c in all_cases(args.quick)})
    if only - set(known):
        print(f"kernels.bench: --only: unknown kernel(s) {sorted(only - set(known))}; valid: {', '.join(known)}",
              file=sys.stderr)
        return 2
    cases = [c for c in all_cases(args.quick) if not only or c.kernel in only]
    print(f"# {prov['gpu_name']} (peaks: {peaks.name}), torch {prov['torch_version']}, triton "
          f"{prov['triton_version']}, {len(cases)} cases")
    print(f"{'kernel':<18} {'variant':<20} {'model layer':<28} {'shape':<34} {'time_ms':>9} {'TFLOP/s':>8} "
          f"{'GB/s':>8} {'%roof':>6} {'vs base':>7} {'rel_err':>8}")
    rows, start = [], time.perf_counter()
    for case in cases:
        try:
            row = run_case(case, device, peaks, args.quick, tol)
        except Exception as err:  # NOTE: one broken case must not lose the others' timings; it is recorded
            row = _failed_row(case, f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
        rows.append(row)
        _print_row(row)
        if on_gpu:
            torch.cuda.empty_cache()
    _write(rows, prov, args.out)
    bad = sum(not row["correct"] for row in rows)
    print(f"# {len(rows)} cases in {time.perf_counter() - start:.0f} s, {bad} failed or wrong; wrote {args.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
