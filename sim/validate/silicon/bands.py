"""Error bands of the simulator from the validation matrix: per partition (engine x hardware class x model family)
and metric (TTFT, TPOT), quantiles of measured / simulated, shipped as `sim/validate/data/silicon_error_bands.json`
for the planner (sim/plan/confidence.py).

    python -m sim.validate.silicon.bands <matrix dir or rows.csv> [out=sim/validate/data/silicon_error_bands.json]

A row's ratio is its measured median over the simulated median (`measured_*_s / sim_*_p50_s`, rows.csv of
`python -m sim.validate.silicon`): above 1 the simulator predicted faster than the server ran. The q-quantile of a
partition's ratios is the factor by which a simulated latency must be multiplied so that, had the partition's rows
been the question, a fraction q of them would have come out at or below it. The matrix compares medians of
closed-loop benchmark runs; applying the factor to a P99 under a scenario's traffic is an assumption (the file
says so in `statistic`).

Partition keys: `<engine>/<hardware class>/<model family>` (e.g. `vllm/hopper/moe`) with `*` for "any", at four
levels: exact, engine + hardware class, engine, and `*/*/*` (all rows); the hardware-class levels
`*/<class>/<family>` and `*/<class>/*` serve engines the matrix has no rows for (the planner's fallback order,
docs/planning.md). A partition with fewer than MIN_ROWS rows is not written.
"""
from __future__ import annotations

import csv
import functools
import json
import math
import sys
from pathlib import Path

import numpy as np

from calibrate.aic.catalogue import engine_of
from inferplan.config.yaml_files import read_yaml_mapping
from inferplan.errors import InputError, exit_on_input_error
from inferplan.specs import CONF_DIR
from sim.validate.silicon.models import conf_model

SCHEMA = "inferplan.silicon_error_bands/1"
OUT_PATH = Path(__file__).resolve().parents[1] / "data" / "silicon_error_bands.json"
QUANTILES = (0.5, 0.8, 0.9, 0.95)
MIN_ROWS = 5
METRICS = {"ttft": ("measured_ttft_s", "sim_ttft_p50_s"), "tpot": ("measured_tpot_s", "sim_tpot_p50_s")}
ANY = "*"
STATISTIC = ("ratio of medians: each row's measured median latency over the simulated median of the same closed-loop "
             "benchmark; applying its quantiles to a P99 (or to open-loop traffic) assumes the simulator's error "
             "on the tail is the error on the median")


@functools.cache
def _conf(group: str, name: str) -> dict:
    path = CONF_DIR / group / f"{name}.yaml"
    return read_yaml_mapping(path) if path.is_file() else {}


def hardware_class(hardware: str) -> str:
    """The hardware's generation (`conf/hardware/<name>.yaml` `generation`: hopper, ampere, ...); a system name of
    the matrix (`h200_sxm`) is tried without its `_sxm`; its kind (`cpu`, `gpu`) or the name when it has none."""
    for name in (hardware, hardware.removesuffix("_sxm")):
        spec = _conf("hardware", name)
        if spec:
            return str(spec.get("generation") or spec.get("kind") or name)
    return hardware


def model_family(model: str) -> str:
    """`moe` when the `conf/model` yaml has routed experts (`ffn.moe`), else `dense`; the model name when unknown."""
    spec = _conf("model", model)
    if not spec:
        return model
    return "moe" if (spec.get("ffn") or {}).get("moe") else "dense"


def engine_of_preset(preset: str) -> str:
    """The engine of a `conf/engine` preset name: vllm_v1_serve -> vllm, sglang_v04 -> sglang, trtllm -> trtllm;
    any other preset (generic) is its own name."""
    return engine_of(preset) or preset


def key(engine: str, hw_class: str, family: str) -> str:
    return f"{engine}/{hw_class}/{family}"


def _ratio(rec: dict, metric: str) -> float:
    measured, simulated = METRICS[metric]
    try:
        m, s = float(rec[measured]), float(rec[simulated])
    except (KeyError, TypeError, ValueError):
        return math.nan
    return m / s if math.isfinite(m) and math.isfinite(s) and m > 0 and s > 0 else math.nan


def row_key(rec: dict) -> tuple[str, str, str]:
    """(engine, hardware class, model family) of a rows.csv record."""
    model = conf_model(rec.get("model", "")) or ""
    return rec["engine"], hardware_class(rec["system"]), model_family(model) if model else rec.get("model", "")


def distill(records: list[dict]) -> dict[str, dict]:
    """`{partition key: {metric: {rows, quantiles: {q: ratio}, median_abs_error_pct}}}` over the simulated records."""
    groups: dict[str, dict[str, list[float]]] = {}
    for rec in records:
        if rec.get("status") != "simulated":
            continue
        e, h, f = row_key(rec)
        keys = {key(e, h, f), key(e, h, ANY), key(e, ANY, ANY), key(ANY, h, f), key(ANY, h, ANY), key(ANY, ANY, ANY)}
        for metric in METRICS:
            r = _ratio(rec, metric)
            if math.isfinite(r):
                for k in keys:
                    groups.setdefault(k, {}).setdefault(metric, []).append(r)
    out: dict[str, dict] = {}
    for k in sorted(groups):
        per = {}
        for metric, ratios in sorted(groups[k].items()):
            if len(ratios) < MIN_ROWS:
                continue
            a = np.array(ratios, dtype=np.float64)
            per[metric] = {"rows": int(a.size),
                           "quantiles": {f"{q:g}": float(np.quantile(a, q)) for q in QUANTILES},
                           "median_abs_error_pct": float(np.median(np.abs(1.0 / a - 1.0)) * 100.0)}
        if per:
            out[k] = per
    return out


def read_rows(source: Path) -> tuple[Path, list[dict]]:
    path = source / "rows.csv" if source.is_dir() else source
    if not path.is_file():
        raise InputError("command line", "matrix", f"no rows.csv at {source}",
                         "give the out= folder of `python -m sim.validate.silicon` (or its rows.csv)")
    with path.open(newline="") as fh:
        return path, list(csv.DictReader(fh))


def matrix_source(path: Path) -> dict:
    """What the matrix ran: its table (file name) and options, from the `matrix.json` beside `rows.csv`."""
    doc_path = path.parent / "matrix.json"
    if not doc_path.is_file():
        return {"rows_csv": path.name}
    doc = json.loads(doc_path.read_text())
    opts = doc.get("options") or {}
    table = Path(str((doc.get("source") or {}).get("path", ""))).name
    return {"rows_csv": path.name, "table": table, "table_rows": (doc.get("source") or {}).get("rows"),
            "systems": opts.get("systems"), "rounds": opts.get("rounds"), "limit": opts.get("limit"),
            "ids": len(opts.get("ids") or []) or None,
            "matrix_command": "python -m sim.validate.silicon" + (
                f" systems={','.join(opts['systems'])}" if opts.get("systems") else "")}


def bands_doc(path: Path, records: list[dict], command: str) -> dict:
    partitions = distill(records)
    if key(ANY, ANY, ANY) not in partitions:
        raise InputError(path, "rows", f"fewer than {MIN_ROWS} simulated rows", "run a larger matrix")
    return {"schema": SCHEMA, "source": matrix_source(path), "command": command, "statistic": STATISTIC,
            "ratio": "measured / simulated (above 1: the simulator predicted faster than the server ran)",
            "quantiles": [f"{q:g}" for q in QUANTILES], "min_rows": MIN_ROWS,
            "key": "engine/hardware class/model family, * = any (sim/validate/silicon/bands.py)",
            "simulated_rows": sum(r.get("status") == "simulated" for r in records),
            "partitions": partitions}


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    with exit_on_input_error():
        source, out = Path(argv[0]), OUT_PATH
        for arg in argv[1:]:
            k, sep, v = arg.partition("=")
            if k != "out" or not sep:
                raise InputError("command line", arg, "unknown option", "use out=<file>")
            out = Path(v)
        path, records = read_rows(source)
        doc = bands_doc(path, records, " ".join(["python", "-m", "sim.validate.silicon.bands", "<matrix dir>",
                                                 *argv[1:]]))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(doc['partitions'])} partitions from {doc['simulated_rows']} simulated rows -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
