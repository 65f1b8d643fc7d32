"""`python -m calibrate.crosscheck <folder>`: our cost model against kernel times measured by another project.

For every reference point (Vidur-format tables of any device Vidur names, mapped by `calibrate.vidur`; `--hardware`
takes our conf/hardware name or Vidur's, e.g. `h100` / `h100_dgx` -> h100_sxm) three predictions are compared with
the measured time:
  analytical  the simulator's fallback: datasheet roofline / default efficiency of the op + launch overhead
              (`conf/cost/roofline.yaml`), and for all-reduce the ring formula over the datasheet link bandwidth x
              `link_efficiency` (as `sim.core.cost` prices them);
  profile     a measured profile of that hardware (`calibrate/profiles/<hardware>.parquet`, or --profile), where
              one exists and covers the op;
  refit       our cost-model *form* fitted to the reference data itself (`calibrate.fit`, every 4th shape by size
              held out; errors on held-out shapes only): how well the form can represent that hardware once
              calibrated.
Errors are reported per Vidur op and TP degree (MAPE, median signed error = bias, worst), plus the error of the
per-layer sum of the mapped non-attention ops. Output: a table and a JSON file, by default in the run folder
`runs/crosscheck/<UTC time>/crosscheck.json` under the working directory (`--out` to choose), never in the
repository.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import numpy as np

from inferplan.config.yaml_files import read_yaml_mapping
from calibrate import ops
from calibrate.fit import fit_rows, held_out_shapes
from calibrate.profile import EfficiencyCurve, Profile, load_profile
from calibrate.vidur import BUNDLE, ELEMENTWISE, GEMMS, ReferencePoint, hardware_name, load_reference
from inferplan.errors import InputError, exit_on_input_error
from inferplan.specs import CONF_DIR, HardwareSpec, load_hardware

REPO = Path(__file__).resolve().parent.parent
LAYER_OPS = GEMMS + tuple(ELEMENTWISE)


def _shape(p: ReferencePoint) -> dict[str, float]:
    return {k: float(v) for k, v in (kv.split("=") for kv in p.shape.split(","))}


@lru_cache(maxsize=1)
def vidur_causal_factor() -> float:
    """Prefill attention's causal factor of the kernel Vidur's profiler times (fitted on its A100 table by
    `calibrate.ampere_fit`, `vidur_profiler` in conf/cost/generations/ampere.yaml); 1 where not fitted."""
    from calibrate.efficiency import GENERATIONS_DIR

    path = GENERATIONS_DIR / "ampere.yaml"
    d = read_yaml_mapping(path) if path.is_file() else {}
    return float(((d.get("vidur_profiler") or {}).get("attn_prefill_causal_factor") or {}).get("value", 1.0))


class AnalyticalModel:
    """The simulator's analytical pricing of one op (mirrors `sim.core.cost.pricer.OpPricer` without a profile): the
    scalar defaults, or the hardware generation's fitted shape forms (`calibrate.efficiency`, read from the same
    conf files) where it has them."""

    def __init__(self, hw: HardwareSpec, cost: dict, generation: bool = True) -> None:
        self.hw = hw
        self.efficiency = {k: float(v) for k, v in cost["efficiency"].items()}
        self.launch_s = float(cost["launch_s"])
        self.link_efficiency = float(cost.get("link_efficiency", 1.0))
        self.gen = None
        if generation:
            from calibrate.efficiency import hardware_generation, load_generation  # (the forms the simulator uses)

            self.gen = load_generation(hardware_generation(hw.source))

    def _form_s(self, p: ReferencePoint) -> float | None:
        """The generation's shape form for a Vidur row; prefill attention with the causal factor of the kernel
        Vidur's profiler timed (`vidur_causal_factor`), not the engines' (1)."""
        g, hw = self.gen, self.hw
        if g is None:
            return None
        peak, bw = hw.peak_for(ops.check_dtype(p.dtype)["compute"]), hw.mem_bandwidth_bytes_per_s
        form = g.gemm_form(ops.check_dtype(p.dtype)["compute"], p.dtype) if p.op == "gemm" else None
        if form is not None:
            s = _shape(p)
            return max(self.launch_s, form.time_s(s["m"], s["n"], s["k"], p.flops, p.bytes, peak, bw))
        if p.op == "attn_prefill" and g.attn_prefill is not None:
            from calibrate.ampere_fit import prefill_seq_share

            seq, share = prefill_seq_share(_shape(p))
            form = replace(g.attn_prefill, causal_factor=vidur_causal_factor())
            return max(self.launch_s, form.time_s(p.flops, p.bytes, seq, peak, bw, causal_share=share))
        if p.op == "attn_decode" and g.attn_decode is not None:
            return max(self.launch_s, float(g.attn_decode.time_s(p.flops, p.bytes, peak, bw)))
        if p.op == "elementwise" and g.elementwise is not None:
            from calibrate.ampere_fit import KIND

            if p.vidur_op in KIND:
                return g.elementwise.kernel_s(KIND[p.vidur_op], p.bytes, bw)
            s = _shape(p)  # the bundle: the kernels sarathi ran unfused (two norms, two adds, act, rope)
            t, h, i, r = s["t"], s["h"], s["i"], s["r"]
            k = g.elementwise.kernel_s
            return (2 * k("norm", 2 * t * h * 2.0, bw) + 2 * k("add", 3 * t * h * 2.0, bw)
                    + k("act", 3 * t * i * 2.0, bw) + k("rope", 2 * t * r * 2.0, bw))
        if p.op == "allreduce" and p.link == "intra" and g.allreduce is not None and p.bytes <= g.allreduce.max_bytes:
            return g.allreduce.time_s(p.bytes, p.tp)
        if p.op == "allreduce" and g.nccl is not None:
            bw = hw.intra_node_bandwidth_bytes_per_s if p.link == "intra" else hw.inter_node_bandwidth_bytes_per_s
            return g.nccl.time_s(hw.name, p.link, p.tp, p.bytes, bw)  # (bus_eff replaces link_efficiency)
        return None

    def time_s(self, p: ReferencePoint) -> float:
        t = self._form_s(p)
        if t is not None:
            return t
        if p.op == "allreduce":
            intra = p.link == "intra"
            bw = (self.hw.intra_node_bandwidth_bytes_per_s if intra else self.hw.inter_node_bandwidth_bytes_per_s)
            lat = self.hw.intra_node_latency_s if intra else self.hw.inter_node_latency_s
            return ops.allreduce_s(p.bytes, p.tp, bw * self.link_efficiency, lat)
        peak = self.hw.peak_for(ops.check_dtype(p.dtype)["compute"])
        curve = EfficiencyCurve((1.0,), (self.efficiency[p.op],), self.launch_s)
        return curve.time_s(ops.roofline_s(p.flops, p.bytes, peak, self.hw.mem_bandwidth_bytes_per_s))


def profile_time_s(profile: Profile, p: ReferencePoint) -> float | None:
    curve = profile.curve(p.op, p.dtype)
    if curve is None:
        return None
    peak = profile.peak_flops_per_s.get(ops.check_dtype(p.dtype)["compute"]) or profile.peak_flops_per_s["bf16"]
    return curve.time_s(ops.roofline_s(p.flops, p.bytes, peak, profile.mem_bytes_per_s))


def _axis_s(p: ReferencePoint, hw: HardwareSpec) -> float:
    """The size axis the refit uses: the datasheet roofline (compute ops) or the bandwidth term (all-reduce)."""
    if p.op == "allreduce":
        bw = hw.intra_node_bandwidth_bytes_per_s if p.link == "intra" else hw.inter_node_bandwidth_bytes_per_s
        return 2.0 * (p.tp - 1) / p.tp * p.bytes / bw
    peak = hw.peak_for(ops.check_dtype(p.dtype)["compute"])
    return ops.roofline_s(p.flops, p.bytes, peak, hw.mem_bandwidth_bytes_per_s)


def refit_predictions(points: list[ReferencePoint], hw: HardwareSpec, every: int = 4
                      ) -> tuple[dict[int, float], dict[str, dict]]:
    """Fit one curve per (op, dtype) (all-reduce: per link and rank count) on the non-held-out shapes; returns
    predictions for the held-out points (by index) and each fit's summary."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for i, p in enumerate(points):
        name = f"{p.op}/{p.dtype}" + (f"/{p.link}/{p.tp}" if p.op == "allreduce" else "")
        name += "/bundle" if p.vidur_op == BUNDLE else ""
        groups[name].append({"i": i, "op": name, "dtype": p.dtype, "shape": f"{p.model}|{p.tp}|{p.shape}",
                             "roofline_s": _axis_s(p, hw), "measured_s": p.measured_s})
    predictions, fits = {}, {}
    for name, rows in sorted(groups.items()):
        held = held_out_shapes(rows, every)
        fit = fit_rows(rows, held)
        if fit is None:
            continue
        fits[name] = fit.summary()
        for r in rows:
            if (r["op"], r["dtype"], r["shape"]) in held:
                predictions[r["i"]] = fit.curve.time_s(r["roofline_s"])
    return predictions, fits


def _stats(pairs: list[tuple[float, float]]) -> dict:
    """MAPE, median signed error (bias) and worst absolute error, in percent, of (predicted, measured) pairs."""
    if not pairs:
        return {"n": 0, "mape_pct": None, "bias_pct": None, "worst_pct": None}
    err = np.array([100.0 * (pred - meas) / meas for pred, meas in pairs])
    return {"n": len(pairs), "mape_pct": float(np.mean(np.abs(err))), "bias_pct": float(np.median(err)),
            "worst_pct": float(np.max(np.abs(err)))}


def crosscheck(points: list[ReferencePoint], hw: HardwareSpec, cost: dict, profile: Profile | None,
               holdout_every: int = 4) -> dict:
    """Errors of each cost model per (Vidur op, TP) and of the per-layer sums; JSON-ready."""
    analytical = AnalyticalModel(hw, cost)
    ana = [analytical.time_s(p) for p in points]
    prof = [profile_time_s(profile, p) if profile is not None else None for p in points]
    refit, fits = refit_predictions(points, hw, holdout_every)
    cells: dict[tuple[str, int], dict[str, list]] = defaultdict(lambda: defaultdict(list))
    layers: dict[tuple[str, int, int], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for i, p in enumerate(points):
        cell = cells[(p.vidur_op, p.tp)]
        cell["analytical"].append((ana[i], p.measured_s))
        if prof[i] is not None:
            cell["profile"].append((prof[i], p.measured_s))
        if i in refit:
            cell["refit"].append((refit[i], p.measured_s))
        if p.vidur_op in LAYER_OPS:
            acc = layers[(p.model, p.tp, p.tokens)]
            acc["measured"] += p.measured_s
            acc["analytical"] += ana[i]
            acc["n"] += 1
    kinds = ("analytical", "profile", "refit")
    by_op_tp = [{"op": op, "tp": tp, **{kind: _stats(cells[(op, tp)][kind]) for kind in kinds}}
                for op, tp in sorted(cells)]
    pooled: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for (op, _), cell in cells.items():
        for kind in kinds:
            pooled[op][kind] += cell[kind]
    by_op = [{"op": op, **{kind: _stats(pooled[op][kind]) for kind in kinds}} for op in sorted(pooled)]
    complete: dict[str, float] = defaultdict(float)  # ops a model's table maps per layer (phi-2 has one fewer)
    for (model, _, _), acc in layers.items():
        complete[model] = max(complete[model], acc["n"])
    per_model: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
    for (model, tp, _), acc in layers.items():
        if acc["n"] == complete[model]:
            per_model[(model, tp)].append((acc["analytical"], acc["measured"]))
    by_layer = [{"model": m, "tp": tp, "analytical": _stats(v)} for (m, tp), v in sorted(per_model.items())]
    return {"hardware": hw.name, "points": len(points), "cost": cost,
            "profile": None if profile is None else profile.path, "holdout_every": holdout_every,
            "by_op": by_op, "by_op_tp": by_op_tp, "layer_sum": by_layer, "refit_curves": fits}


def _load_cost(path: Path) -> dict:
    if not path.is_file():
        raise InputError(path, "path", "cost defaults not found", "give --cost conf/cost/roofline.yaml")
    cost = read_yaml_mapping(path)
    for key in ("efficiency", "launch_s"):
        if key not in cost:
            raise InputError(path, key, "missing", "see conf/cost/roofline.yaml")
    return {k: cost[k] for k in ("efficiency", "launch_s", "link_efficiency") if k in cost}


def _profile(arg: str, hw: HardwareSpec) -> Profile | None:
    if arg == "none":
        return None
    path = REPO / "calibrate" / "profiles" / f"{hw.name}.parquet" if arg == "auto" else Path(arg)
    if arg == "auto" and not path.is_file():
        return None
    return load_profile(path, expected_hardware=hw.name)


def _fmt(s: dict) -> str:
    return "-" if s["n"] == 0 else f"{s['mape_pct']:.1f} / {s['bias_pct']:+.1f} / {s['worst_pct']:.0f}"


def print_tables(result: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console = console if console.is_terminal else Console(width=150)
    table = Table(title=f"cost model vs Vidur's measurements on {result['hardware']}: MAPE / median signed / worst "
                        "(%); refit = held-out shapes only")
    for col in ("Vidur op", "TP", "points", "analytical", "profile", "refit (held out)"):
        table.add_column(col, justify="left" if col == "Vidur op" else "right")
    for row in result["by_op_tp"]:
        table.add_row(row["op"], str(row["tp"]), str(row["analytical"]["n"]), _fmt(row["analytical"]),
                      _fmt(row["profile"]), _fmt(row["refit"]))
    console.print(table)
    pooled = Table(title="all TP degrees pooled: MAPE / median signed / worst (%)")
    for col in ("Vidur op", "points", "analytical", "profile", "refit (held out)"):
        pooled.add_column(col, justify="left" if col == "Vidur op" else "right")
    for row in result["by_op"]:
        pooled.add_row(row["op"], str(row["analytical"]["n"]), _fmt(row["analytical"]), _fmt(row["profile"]),
                       _fmt(row["refit"]))
    console.print(pooled)
    layer = Table(title="per-layer sum of the mapped non-attention ops, analytical (%)")
    for col in ("model", "TP", "sizes", "MAPE / median signed / worst"):
        layer.add_column(col)
    for row in result["layer_sum"]:
        layer.add_row(row["model"], str(row["tp"]), str(row["analytical"]["n"]), _fmt(row["analytical"]))
    console.print(layer)


def default_out() -> Path:
    """runs/crosscheck/<UTC time>/crosscheck.json under the working directory (a run folder, git-ignored)."""
    import datetime

    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return Path("runs") / "crosscheck" / stamp / "crosscheck.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m calibrate.crosscheck", description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="Vidur reference profiles, e.g. ../shared/reference-profiles/vidur")
    parser.add_argument("--hardware", default="a100_80gb", help="conf/hardware entry (or Vidur device/node name) "
                                                                "the tables were measured on")
    parser.add_argument("--cost", default=str(CONF_DIR / "cost" / "roofline.yaml"), help="analytical defaults")
    parser.add_argument("--profile", default="auto", help="auto (calibrate/profiles/<hardware>.parquet if any), "
                                                          "none, or a path")
    parser.add_argument("--out", default=None, help="JSON output path (default runs/crosscheck/<UTC time>/"
                                                    "crosscheck.json)")
    parser.add_argument("--sample-rows", type=int, default=None, help="use at most this many rows per file, "
                                                                      "spread over it (tests)")
    args = parser.parse_args(argv)
    with exit_on_input_error():
        hw = load_hardware(hardware_name(args.hardware))
        points, notes = load_reference(args.folder, args.sample_rows)
        present = sorted({p.hardware for p in points})
        points = [p for p in points if p.hardware == hw.name]
        if not points:
            raise InputError(args.folder, "--hardware", f"no table maps to {hw.name} (the tables here map to "
                             f"{', '.join(present)})", f"give --hardware {present[0]}")
        result = crosscheck(points, hw, _load_cost(Path(args.cost)), _profile(args.profile, hw))
        result |= {"source": str(Path(args.folder).resolve()), "notes": notes}
        out = Path(args.out) if args.out else default_out()
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1) + "\n")
        print_tables(result)
        for note in notes:
            print(f"note: {note}")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
