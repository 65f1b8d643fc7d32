"""What the measured TTFT holds beyond the simulated kernels, per engine, collection and model, at light load.

    python -m sim.validate.silicon.beyond <matrix dir or rows.csv> [clients=8] [csv=<table>] [out=<file.json>]

The input is a matrix run with no front-end time (`python -m sim.validate.silicon frontend=none`): each simulated
TTFT is then the kernels' time plus the scheduler's queueing, nothing the front-end fit added. For the rows at most
`clients` clients (little queueing) whose decode agrees (simulated TPOT within `fit.DECODE_OFF_PCT` of the
measured), grouped by engine, collection (where the row was measured: AIConfigurator's gap-analysis collection or
InferenceX, `collection_of`) and model, it reports medians of:

* `ttft_ratio`: measured TTFT / simulated TTFT (with its interquartile range): how much longer the server took;
* `prefills`: measured TTFT / the row's mean prompt priced as one prefill alone: the measured TTFT in prefills;
* `beyond_s`: measured - simulated TTFT, seconds;
* `tpot_ratio`: measured TPOT / simulated TPOT: the decode check (near 1: the kernels run as the row records).

A front-end fit is one per engine and scored leave-one-model-out; this table shows where one engine's models (or
collections) disagree on what lies beyond the kernels, which no such fit can carry from one model to another.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

from inferplan.errors import InputError, exit_on_input_error
from sim.validate.silicon.cli import key_values, positive
from sim.validate.silicon.clients import collection_of
from sim.validate.silicon.fit import DECODE_OFF_PCT, KEYS
from sim.validate.silicon.runner import read_records
from sim.validate.silicon.table import CSV_PATH, read_table

SCHEMA = "inferplan.silicon_beyond/1"
OPTIONS = ("clients", "csv", "out")
LIGHT_CLIENTS = 8


def rows_path(given: Path) -> Path:
    """`rows.csv` of a matrix directory, or the file given."""
    path = given / "rows.csv" if given.is_dir() else given
    if not path.is_file():
        raise InputError(given, "path", "no rows.csv there", "give a matrix directory or its rows.csv "
                         "(python -m sim.validate.silicon frontend=none out=<dir>)")
    return path


def _with_frontend(rec: dict) -> bool:
    """Whether the record was simulated with a front-end term other than 0 (its `overrides` set each key)."""
    for part in str(rec.get("overrides") or "").split():
        key, _, value = part.lstrip("+").partition("=")
        if key.removeprefix("engine.") in KEYS:
            try:
                if float(value) != 0.0:
                    return True
            except ValueError:
                return True
    return False


def _median_iqr(values: list[float]) -> dict:
    q = np.percentile(np.array(values), [25, 50, 75])
    return {"median": float(q[1]), "q25": float(q[0]), "q75": float(q[2])}


def beyond(records: list[dict], collections: dict[str, str], clients: int) -> list[dict]:
    """One summary per (engine, collection, model) of the light-load simulated records (module docstring)."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for r in records:
        if r["status"] != "simulated" or not r["clients"] <= clients:
            continue
        if not (math.isfinite(r["sim_ttft_p50_s"]) and math.isfinite(r["sim_tpot_p50_s"])):
            continue
        if abs(r["tpot_error_pct"]) > DECODE_OFF_PCT:
            continue
        key = (r["engine"], collections.get(r["id"], "unrecorded"), r["model"])
        groups.setdefault(key, []).append(r)
    out = []
    for (engine, collection, model), rs in sorted(groups.items()):
        prefills = [r["measured_ttft_s"] / r["sim_prefill_alone_s"] for r in rs
                    if math.isfinite(r["sim_prefill_alone_s"]) and r["sim_prefill_alone_s"] > 0]
        out.append({"engine": engine, "collection": collection, "model": model, "rows": len(rs),
                    "systems": sorted({r["system"] for r in rs}),
                    "ttft_ratio": _median_iqr([r["measured_ttft_s"] / r["sim_ttft_p50_s"] for r in rs]),
                    "prefills": _median_iqr(prefills) if prefills else None,
                    "beyond_s": float(np.median([r["measured_ttft_s"] - r["sim_ttft_p50_s"] for r in rs])),
                    "tpot_ratio": float(np.median([r["measured_tpot_s"] / r["sim_tpot_p50_s"] for r in rs]))})
    return out


def text(summaries: list[dict], clients: int) -> str:
    lines = [f"measured TTFT beyond the simulated kernels, rows with <= {clients} clients and the decode in agreement "
             "(medians; [interquartile range])",
             f"{'engine':7s} {'collection':12s} {'model':20s} {'rows':>4s}  {'TTFT meas/sim':>20s}  "
             f"{'TTFT in prefills':>20s}  {'beyond s':>8s}  {'TPOT meas/sim':>13s}"]
    for s in summaries:
        t, p = s["ttft_ratio"], s["prefills"]
        ratio = f"{t['median']:5.2f} [{t['q25']:.2f}-{t['q75']:.2f}]"
        pre = f"{p['median']:5.2f} [{p['q25']:.2f}-{p['q75']:.2f}]" if p else "-"
        lines.append(f"{s['engine']:7s} {s['collection']:12s} {s['model'][:20]:20s} {s['rows']:>4d}  {ratio:>20s}  "
                     f"{pre:>20s}  {s['beyond_s']:8.3f}  {s['tpot_ratio']:13.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    with exit_on_input_error():
        run(sys.argv[1:] if argv is None else argv)


def run(argv: list[str]) -> None:
    """The command (module docstring)."""
    if not argv or "=" in argv[0]:
        raise InputError("command line", "rows", "no matrix given", "give a matrix directory or its rows.csv "
                         "first (python -m sim.validate.silicon frontend=none out=<dir>)")
    path = rows_path(Path(argv[0]))
    args = key_values(argv[1:], OPTIONS)
    clients = positive(args, "clients", LIGHT_CLIENTS)
    assert clients is not None
    records = read_records(path)
    if any(r["status"] == "simulated" and _with_frontend(r) for r in records):
        raise InputError(path, "overrides", "rows simulated with front-end time",
                         "give the rows of python -m sim.validate.silicon frontend=none")
    table = read_table(Path(args.get("csv") or CSV_PATH))
    summaries = beyond(records, {row.id: collection_of(row.source) for row in table}, clients)
    print(text(summaries, clients))
    if args.get("out"):
        Path(args["out"]).write_text(json.dumps({"schema": SCHEMA, "rows_csv": str(path), "clients": clients,
                                                 "groups": summaries}, indent=1) + "\n")


if __name__ == "__main__":
    main()
