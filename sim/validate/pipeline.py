"""The trust loop end to end: read -> (reconstruct send times) -> resolve the deployment -> replay -> compare ->
(fit on a training split, compare on the held-out rest, write the overlay) -> write validation.json, the
per-request table and the chart. `__main__.py` parses the command line and prints; this module does the work.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from sim.results.write import write_run
from sim.results.result import nan_to_none
from sim.validate.arrivals import reconstruct
from sim.validate.compare import LOAD_KEYS, METRICS, compare, load_levels, per_request_error_pct
from sim.validate.deployment import check_fit_supported, resolve, safe_name
from sim.validate.fit import fit, train_mask
from sim.validate.formats import read_measured
from sim.validate.overlay import read_overlay, write_overlay
from sim.validate.plot import LABELS, write_chart
from sim.validate.replay import Replay, replay

SCHEMA = "inferplan.validation/1"


@dataclass(frozen=True)
class Options:
    """The command's own `key=value` arguments (everything else is a Hydra override)."""

    measured: str
    format: str = "auto"
    out: str | None = None
    fit: bool = False
    overlay: str | None = None
    run: int | None = None
    request_rate: float | None = None
    arrival_seed: int | None = None
    holdout_fraction: float = 0.3
    split_seed: int = 0
    max_model_len: int | None = None
    max_simulations: int = 48


def default_out_dir(measured: str) -> Path:
    return Path("runs") / "validate" / safe_name(Path(measured).stem) / time.strftime("%Y-%m-%d_%H-%M-%S")


def run_validation(opts: Options, overrides: list[str]) -> tuple[dict, Path]:
    """Run the loop; returns (the validation.json document, the output folder)."""
    measured = reconstruct(read_measured(opts.measured, opts.format, opts.run), opts.arrival_seed, opts.request_rate)
    out = Path(opts.out) if opts.out else default_out_dir(opts.measured)
    out.mkdir(parents=True, exist_ok=True)
    overlay_overrides, overlay_info = read_overlay(opts.overlay) if opts.overlay else ([], None)
    dep = resolve(measured, [*overlay_overrides, *overrides], out, opts.max_model_len)
    limit = measured.client.get("max_concurrency") if measured.arrival_source == "reconstructed" else None
    limit = int(limit) if limit else None
    base = replay(dep.run, measured, limit)
    write_run(base.result, out / "replay")
    doc = {
        "schema": SCHEMA,
        "measured": {"path": measured.path, "format": measured.format, "version": measured.version,
                     "requests_in_log": measured.sent_requests, "requests_used": len(measured),
                     "skipped": measured.skipped, "arrival_source": measured.arrival_source,
                     "client": measured.client, "notes": list(measured.notes)},
        "deployment": dep.describe(),
        "overlay_in_effect": overlay_info,
        "client_semaphore": {"max_concurrency": limit, "rounds": base.semaphore_rounds} if limit else None,
        "per_request_comparable": measured.arrival_source == "log",
        "load_keys": LOAD_KEYS,
        "baseline": compare(measured, base),
        "fit": None,
        "files": {"replay": str(out / "replay"), "per_request": str(out / "validation_requests.parquet")},
    }
    table = _per_request_table(measured, base, "sim")
    blocks, frames = {"baseline": doc["baseline"]}, [_errors_frame(measured, base, "baseline")]
    if opts.fit:
        check_fit_supported(dep.run)
        train = train_mask(len(measured), opts.holdout_fraction, opts.split_seed)
        result = fit(dep.run, measured, train, client_limit=limit, max_simulations=opts.max_simulations)
        fitted = replay(result.params.apply(dep.run), measured, limit)
        write_run(fitted.result, out / "replay_fitted")
        held = ~train
        heldout = compare(measured, fitted, held, with_throughput=False)
        name = safe_name(Path(opts.measured).stem)
        files = write_overlay(result.params, out, name, {
            "measured": measured.path, "train_requests": int(train.sum()), "heldout_requests": int(held.sum()),
            "heldout_ttft_p50_error_pct": _round(heldout["metrics"]["ttft_s"]["p50"]["error_pct"]),
            "heldout_tpot_p50_error_pct": _round(heldout["metrics"]["tpot_s"]["p50"]["error_pct"])})
        doc["fit"] = {
            **result.as_dict(),
            "split": {"holdout_fraction": opts.holdout_fraction, "seed": opts.split_seed,
                      "train_requests": int(train.sum()), "heldout_requests": int(held.sum()),
                      "how": "seeded permutation of the measured rows; the loss reads training rows only, "
                             "every simulation replays all rows"},
            "heldout": heldout,
            "heldout_before_fit": compare(measured, base, held, with_throughput=False),
            "train": compare(measured, fitted, train, with_throughput=False),
            "overlay": files,
        }
        doc["files"]["replay_fitted"] = str(out / "replay_fitted")
        table.update(_per_request_table(measured, fitted, "fitted"))
        table["split"] = np.where(train, "train", "heldout").astype(object)
        blocks["fitted (held-out)"] = heldout
        blocks["baseline (held-out)"] = doc["fit"]["heldout_before_fit"]
        frames = [_errors_frame(measured, base, "baseline", held), _errors_frame(measured, fitted, "fitted", held)]
    pq.write_table(pa.table(table), out / "validation_requests.parquet", compression="zstd")
    title = f"{Path(measured.path).name}: measured vs simulated ({dep.run.scenario.name})"
    if opts.fit:
        blocks = {"baseline": blocks["baseline (held-out)"], "fitted": blocks["fitted (held-out)"]}
        title += ", held-out requests"
    doc["files"].update(write_chart(out, blocks, pd.concat(frames, ignore_index=True), title))
    (out / "validation.json").write_text(json.dumps(nan_to_none(_jsonable(doc)), indent=2) + "\n")
    return doc, out


def _round(x):
    return None if x is None or not math.isfinite(x) else round(float(x), 2)


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x


def _per_request_table(measured, rep: Replay, prefix: str) -> dict:
    """Columns of validation_requests.parquet for one replay (`sim_*` or `fitted_*`)."""
    cols = {}
    if prefix == "sim":
        cols.update({"log_index": measured.index, "arrival_s": measured.arrival_s,
                     "prompt_tokens": measured.prompt_tokens, "output_tokens": measured.output_tokens,
                     **{f"measured_{m}": getattr(measured, m) for m in METRICS}})
        cols.update(load_levels(measured, rep))
        cols["split"] = np.full(len(measured), "all", dtype=object)
    cols[f"{prefix}_send_s"] = rep.send_s
    cols[f"{prefix}_status"] = rep.status.astype(object)
    for m in METRICS:
        cols[f"{prefix}_{m}"] = getattr(rep, m)
    for m, e in per_request_error_pct(measured, rep).items():
        cols[f"{prefix}_{m.removesuffix('_s')}_error_pct"] = e
    return cols


def _errors_frame(measured, rep: Replay, label: str, mask: np.ndarray | None = None) -> pd.DataFrame:
    """Per-request signed errors in long form (metric, error_pct, label, measured_inflight) for the chart."""
    mask = np.ones(len(measured), dtype=bool) if mask is None else mask
    inflight = load_levels(measured, rep)["measured_inflight"]
    frames = []
    for m, e in per_request_error_pct(measured, rep).items():
        ok = mask & np.isfinite(e)
        frames.append(pd.DataFrame({"metric": LABELS[m],
                                    "error_pct": e[ok], "label": label, "measured_inflight": inflight[ok]}))
    return pd.concat(frames, ignore_index=True)


__all__ = ["Options", "SCHEMA", "run_validation"]
