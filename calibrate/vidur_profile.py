"""`python -m calibrate.vidur_profile <folder> --hardware <name> --out <file.parquet>`: a profile from Vidur tables.

A user who has Vidur-format measurements (`data/profiling/compute/<gpu>/<model>/mlp.csv`, `attention*.csv`) of a
device can price with them: this fits our cost-model form (`calibrate.fit.fit_curve`: launch + roofline /
efficiency(roofline)) to every mapped point of that device (`calibrate.vidur`), one curve per (op, dtype), and
writes a profile (`calibrate.profile`) usable as `cost.profile=<file>`. Peaks are the conf/hardware datasheet's
(the roofline axis the curves were fitted on). Ops mapped: gemm (the four projections), elementwise (the per-layer
bundle, as the simulator prices it), attn_prefill, attn_decode. All-reduce tables are not part of a profile (the
simulator prices collectives from conf/hardware links); their fit is what `calibrate.crosscheck` reports as refit.
"""
from __future__ import annotations

import argparse
import datetime
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from calibrate import ops
from calibrate.fit import fit_curve
from calibrate.profile import write_profile
from calibrate.vidur import BUNDLE, GEMMS, ReferencePoint, hardware_name, load_reference
from inferplan.errors import InputError, exit_on_input_error
from inferplan.specs import HardwareSpec, load_hardware

PROFILE_OPS = {**{g: "gemm" for g in GEMMS}, BUNDLE: "elementwise", "attn_prefill": "attn_prefill",
               "attn_decode": "attn_decode"}


def profile_knots(points: list[ReferencePoint], hw: HardwareSpec) -> tuple[list[dict], dict]:
    """Knot rows (calibrate.profile COLUMNS) and a per-curve summary, fitted on every point of `hw`."""
    series: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for p in points:
        op = PROFILE_OPS.get(p.vidur_op)
        if op is None or p.hardware != hw.name:
            continue
        peak = hw.peak_for(ops.check_dtype(p.dtype)["compute"])
        series[(op, p.dtype)].append((ops.roofline_s(p.flops, p.bytes, peak, hw.mem_bandwidth_bytes_per_s),
                                      p.measured_s))
    rows, fits = [], {}
    for (op, dtype), pts in sorted(series.items()):
        r = np.array([x for x, _ in pts])
        t = np.array([y for _, y in pts])
        curve = fit_curve(r, t)
        err = [abs(curve.time_s(x) / y - 1.0) * 100.0 for x, y in pts]
        fits[f"{op}/{dtype}"] = {"points": len(pts), "mape_pct": float(np.mean(err)), "launch_s": curve.launch_s}
        for x, e in zip(curve.roofline_s, curve.efficiency):
            rows.append({"op": op, "dtype": dtype, "roofline_s": x, "efficiency": e, "launch_s": curve.launch_s})
    return rows, fits


def convert(folder: str | Path, hardware: str, out: str | Path) -> tuple[Path, dict]:
    hw = load_hardware(hardware_name(hardware))
    points, _ = load_reference(folder)
    rows, fits = profile_knots(points, hw)
    if not rows:
        raise InputError(folder, "--hardware", f"no compute table maps to {hw.name}",
                         "give the device the tables were measured on (a100, h100, a40 or our name)")
    meta = {"hardware": hw.name, "device": f"Vidur-format tables ({Path(folder).resolve()})",
            "date": datetime.date.today().isoformat(), "source": "vidur-format tables",
            "peaks": {"flops_per_s": dict(hw.peak_flops_per_s), "mem_bytes_per_s": hw.mem_bandwidth_bytes_per_s},
            "fit": fits}
    return write_profile(out, rows, meta), fits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m calibrate.vidur_profile", description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="Vidur-format tables (compute/<gpu>/<model>/mlp.csv, attention*.csv)")
    parser.add_argument("--hardware", required=True, help="conf/hardware entry or Vidur device name")
    parser.add_argument("--out", required=True, help="profile path to write (.parquet)")
    args = parser.parse_args(argv)
    with exit_on_input_error():
        path, fits = convert(args.folder, args.hardware, args.out)
        for name, f in fits.items():
            print(f"{name}: {f['points']} points, in-sample MAPE {f['mape_pct']:.1f}%")
        print(f"wrote {path} (use with cost.profile={path})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
