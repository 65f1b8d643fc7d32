"""The matrix's results: `matrix.json` (schema `inferplan.silicon_matrix/1`, below) and the text report.

```
schema, status: completed|interrupted, source: {path, rows}, options: {...}, wall_s,
counts: {rows, simulated, failed, unsupported, not_run, unsupported_by_reason: {reason: n},
         failed_reasons: {line: n}},
reasons: {reason: label},
overall | partitions.<partition> | bands.<band> | partition_bands.<partition>.<band>:
    {rows, ttft: {rows, median_abs_pct, mape_pct, bias_pct}, tpot: {...}}     # errors of the simulated median
overall_means: the same for the simulated mean (a check: the file's statistic is most likely the median)
files: {rows_csv, rows_parquet, report, chart_html, chart_svg, chart_vega_lite}
```
"""
from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

from sim.validate.silicon.metrics import band_key, band_order, grouped, partition, summarize
from sim.validate.silicon.support import REASONS

SCHEMA = "inferplan.silicon_matrix/1"


def _means(records: list[dict]) -> dict:
    return summarize([{"ttft_error_pct": r["ttft_mean_error_pct"], "tpot_error_pct": r["tpot_mean_error_pct"]}
                      for r in records])


def build_doc(records: list[dict], source: Path, rows_total: int, options: dict, wall_s: float,
              interrupted: bool) -> dict:
    simulated = [r for r in records if r["status"] == "simulated"]
    failed = [r for r in records if r["status"] == "failed"]
    unsupported = [r for r in records if r["status"] == "unsupported"]
    by_reason = Counter(r["reason"] for r in unsupported)
    bands = grouped(simulated, band_key)
    parts = grouped(simulated, partition)
    return {
        "schema": SCHEMA, "status": "interrupted" if interrupted else "completed",
        "source": {"path": str(source), "rows": rows_total}, "options": options, "wall_s": wall_s,
        "counts": {"rows": rows_total, "simulated": len(simulated), "failed": len(failed),
                   "unsupported": len(unsupported), "not_run": rows_total - len(records),
                   "unsupported_by_reason": dict(by_reason.most_common()),
                   "failed_reasons": dict(Counter(r["detail"] for r in failed).most_common())},
        "reasons": {k: REASONS[k] for k in by_reason},
        "overall": summarize(simulated),
        "partitions": parts,
        "bands": {k: bands[k] for k in sorted(bands, key=band_order)},
        "partition_bands": {p: grouped([r for r in simulated if partition(r) == p], band_key) for p in parts},
        "overall_means": _means(simulated),
    }


def _json_safe(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def write_doc(doc: dict, path: Path) -> None:
    Path(path).write_text(json.dumps(_json_safe(doc), indent=1) + "\n")


def _pct(v) -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.1f}"


def _signed(v) -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:+.1f}"


HEADER = (f"{'':44s} {'rows':>5s} │ {'TTFT med|e|':>11s} {'MAPE':>7s} {'bias':>7s} │ {'TPOT med|e|':>11s} "
          f"{'MAPE':>7s} {'bias':>7s}")


def table_line(name: str, s: dict) -> str:
    t, p = s["ttft"], s["tpot"]
    return (f"{name:44s} {s['rows']:>5d} │ {_pct(t['median_abs_pct']):>11s} {_pct(t['mape_pct']):>7s} "
            f"{_signed(t['bias_pct']):>7s} │ {_pct(p['median_abs_pct']):>11s} {_pct(p['mape_pct']):>7s} "
            f"{_signed(p['bias_pct']):>7s}")


def text_report(doc: dict) -> str:
    c = doc["counts"]
    lines = [f"silicon matrix: {doc['source']['path']} ({c['rows']} rows): {c['simulated']} simulated, "
             f"{c['failed']} failed, {c['unsupported']} not expressible"
             + (f", {c['not_run']} not run (interrupted)" if c["not_run"] else "") + f"; wall {doc['wall_s']:.0f} s"]
    held = (doc.get("options") or {}).get("held_out")
    if held:
        lines.append(f"held out: each row's front-end time fitted without its own model ({held})")
    if c["unsupported_by_reason"]:
        lines.append("not expressible, by reason (first that applies):")
        lines += [f"  {n:>5d}  {doc['reasons'].get(k, k)}" for k, n in c["unsupported_by_reason"].items()]
    if c["failed_reasons"]:
        lines.append("failed:")
        lines += [f"  {n:>5d}  {why}" for why, n in c["failed_reasons"].items()]
    if not c["simulated"]:
        return "\n".join(lines)
    lines += ["error of the simulated median against the measured value, % (median |error|, mean |error| = MAPE, "
              "bias = median signed error; negative = simulated faster)", HEADER]
    lines += [table_line(p, s) for p, s in doc["partitions"].items()]
    lines += [table_line("overall", doc["overall"]), "by client concurrency:"]
    lines += [table_line(f"  {b} clients", s) for b, s in doc["bands"].items()]
    lines.append(table_line("check: simulated means, overall", doc["overall_means"]))
    return "\n".join(lines)


def typed_frame(frame):
    """The records' frame with each column whose filled cells are all numbers as float (empty and NaN cells: NaN,
    as a simulated row whose requests did not complete leaves its statistics), the others as text."""
    import pandas as pd

    for col in frame.columns:
        present = frame[col].replace("", float("nan"))
        numeric = pd.to_numeric(present, errors="coerce")
        filled = int(present.notna().sum())
        if filled and int(numeric.notna().sum()) == filled:
            frame[col] = numeric
    return frame


def write_outputs(records: list[dict], out_dir: Path, source: Path, rows_total: int, options: dict, wall_s: float,
                  interrupted: bool) -> dict:
    """`matrix.json`, `rows.parquet`, `report.txt` and the chart into `out_dir` (rows.csv is already there);
    returns the document."""
    import pandas as pd

    from sim.validate.silicon.plot import write_chart
    from sim.validate.silicon.runner import FIELDS

    out_dir = Path(out_dir)
    doc = build_doc(records, source, rows_total, options, wall_s, interrupted)
    typed_frame(pd.DataFrame(records, columns=list(FIELDS))).to_parquet(out_dir / "rows.parquet", index=False)
    title = f"silicon matrix: {doc['counts']['simulated']} simulated rows ({Path(source).name})"
    doc["files"] = {"rows_csv": str(out_dir / "rows.csv"), "rows_parquet": str(out_dir / "rows.parquet"),
                    "report": str(out_dir / "report.txt"), **write_chart(out_dir, records, title)}
    write_doc(doc, out_dir / "matrix.json")
    (out_dir / "report.txt").write_text(text_report(doc) + "\n")
    return doc
