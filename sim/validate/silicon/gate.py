"""The fidelity gate: the matrix of a fixed, small subset of the shipped rows, committed as
`sim/validate/data/silicon_baseline.json`, recomputed by `tests/validate/test_silicon_gate.py`. A change fails the
gate when the overall median |error| of TTFT or TPOT grows by more than 2 points, a partition's by more than 10,
or a baseline row no longer simulates. (Improvements pass; re-record the baseline with them.)

`python -m sim.validate.silicon.gate [jobs=2]` recomputes and compares; `update=true` rewrites the baseline (same
rows); `update=true from=<rows.csv of a full run>` also re-chooses the rows (`choose_subset`).
"""
from __future__ import annotations

import csv
import json
import sys
import tempfile
import time
from pathlib import Path

from inferplan.errors import InputError, exit_on_input_error
from sim.validate.silicon.metrics import band_order, partition
from sim.validate.silicon.report import build_doc, write_doc
from sim.validate.silicon.runner import run_matrix
from sim.validate.silicon.table import CSV_PATH, DATA_DIR, read_table

BASELINE_PATH = DATA_DIR / "silicon_baseline.json"
SCHEMA = "inferplan.silicon_baseline/1"
OVERALL_POINTS = 2.0      # the overall median |error| may grow by this much (percentage points)
PARTITION_POINTS = 10.0   # a partition's
MAX_ROW_WALL_S = 1.5      # rows chosen for the gate ran in at most this long in the full run (interpreted)


def choose_subset(records: list[dict], max_wall_s: float = MAX_ROW_WALL_S) -> list[str]:
    """Per partition of a full run's simulated records, its quickest row (every partition is covered), plus the
    quickest row of its lowest and of its highest concurrency band when those took at most `max_wall_s`: both ends
    of each partition's load range where that is cheap."""
    by_part: dict[str, list[dict]] = {}
    for r in records:
        if r["status"] == "simulated":
            by_part.setdefault(partition(r), []).append(r)
    ids: list[str] = []

    def quickest(rows: list[dict]) -> dict:
        return min(rows, key=lambda r: (float(r["wall_s"]), r["id"]))

    for part in sorted(by_part):
        rows = by_part[part]
        chosen = [quickest(rows)["id"]]
        bands = sorted({r["band"] for r in rows}, key=band_order)
        for b in (bands[0], bands[-1]):
            best = quickest([r for r in rows if r["band"] == b])
            if float(best["wall_s"]) <= max_wall_s and best["id"] not in chosen:
                chosen.append(best["id"])
        ids += chosen
    return ids


def _figures(summary: dict) -> dict:
    return {"rows": summary["rows"], "ttft_median_abs_pct": summary["ttft"]["median_abs_pct"],
            "tpot_median_abs_pct": summary["tpot"]["median_abs_pct"]}


def compute(ids: list[str], jobs: int = 2, out_dir: Path | None = None, table: Path = CSV_PATH) -> dict:
    """The gate's figures for rows `ids` of `table`: overall and per partition median |error| and row counts."""
    rows = [r for r in read_table(table) if r.id in set(ids)]
    missing = sorted(set(ids) - {r.id for r in rows})
    if missing:
        raise InputError(table, "id", f"baseline row {missing[0]!r} is not in the table", "re-choose the subset")
    with tempfile.TemporaryDirectory() as tmp:
        run = run_matrix(rows, Path(out_dir or tmp), jobs=jobs)
    doc = build_doc(run.records, table, len(rows), {"jobs": jobs}, run.wall_s, bool(run.interrupted_by))
    return {"schema": SCHEMA, "source": CSV_PATH.name, "ids": list(ids), "wall_s": run.wall_s,
            "tolerance_points": {"overall": OVERALL_POINTS, "partition": PARTITION_POINTS},
            "overall": _figures(doc["overall"]),
            "partitions": {p: _figures(s) for p, s in doc["partitions"].items()},
            "bands": {b: _figures(s) for b, s in doc["bands"].items()},
            "failed": {r["id"]: r["detail"] for r in run.records if r["status"] != "simulated"}}


def regressions(current: dict, baseline: dict) -> list[str]:
    """What got worse beyond the tolerances (empty: the gate passes)."""
    out = []
    for rid, why in current.get("failed", {}).items():
        out.append(f"row {rid} no longer simulates: {why}")
    pairs = [("overall", current["overall"], baseline["overall"], OVERALL_POINTS)]
    for part, base in baseline["partitions"].items():
        cur = current["partitions"].get(part, {"rows": 0, "ttft_median_abs_pct": None, "tpot_median_abs_pct": None})
        pairs.append((part, cur, base, PARTITION_POINTS))
    for name, cur, base, tol in pairs:
        if cur["rows"] < base["rows"]:
            out.append(f"{name}: {cur['rows']} rows simulated, baseline {base['rows']}")
            continue
        for m in ("ttft", "tpot"):
            key = f"{m}_median_abs_pct"
            if cur[key] is not None and base[key] is not None and cur[key] > base[key] + tol:
                out.append(f"{name}: {m.upper()} median |error| {cur[key]:.1f}% > baseline {base[key]:.1f}% "
                           f"+ {tol:g} points")
    return out


def load_baseline(path: Path = BASELINE_PATH) -> dict:
    if not Path(path).is_file():
        raise InputError(path, "path", "no baseline", "run `python -m sim.validate.silicon.gate update=true "
                         "from=<rows.csv of a full matrix run>`")
    doc = json.loads(Path(path).read_text())
    if doc.get("schema") != SCHEMA:
        raise InputError(path, "schema", f"expected {SCHEMA}, got {doc.get('schema')!r}", "re-record the baseline")
    return doc


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = dict(a.split("=", 1) for a in argv if "=" in a)
    with exit_on_input_error():
        jobs = int(args.get("jobs", 2))
        update = args.get("update", "false").lower() == "true"
        if "from" in args:
            with open(args["from"], newline="") as fh:
                ids = choose_subset(list(csv.DictReader(fh)))
        else:
            ids = load_baseline()["ids"]
        current = compute(ids, jobs=jobs)
    overall = current["overall"]
    if update:
        current["recorded"] = time.strftime("%Y-%m-%d")
        write_doc(current, BASELINE_PATH)
        print(f"baseline: {BASELINE_PATH} ({len(ids)} rows, {current['wall_s']:.0f} s): TTFT "
              f"{overall['ttft_median_abs_pct']:.1f}%, TPOT {overall['tpot_median_abs_pct']:.1f}%")
        return
    problems = regressions(current, load_baseline())
    print(f"gate: {len(ids)} rows in {current['wall_s']:.0f} s; overall median |error| TTFT "
          f"{overall['ttft_median_abs_pct']:.1f}%, TPOT {overall['tpot_median_abs_pct']:.1f}%")
    for p in problems:
        print(f"  FAIL {p}")
    raise SystemExit(1 if problems else 0)


if __name__ == "__main__":
    main()
