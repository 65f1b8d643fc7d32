"""Readers of measured benchmark logs, one module per client; each returns a `MeasuredRun`.

Read first: `vllm.py` (the richest format), `table.py` (the generic one), `checks.py` (the shared one-line
validators). `format=auto` detects the client from the file's shape (formats doc §8).
"""
from __future__ import annotations

from pathlib import Path

from inferplan.errors import InputError
from sim.validate.formats import sglang, table, vllm
from sim.validate.formats.checks import json_objects, read_text
from sim.validate.measured import MeasuredRun

READERS = {"vllm": vllm.read, "sglang": sglang.read, "table": table.read}


def detect(path: Path) -> str:
    """The reader key for `path`: `.csv`/`.parquet` are tables; JSON is told apart by its keys."""
    if path.suffix in (".csv", ".parquet"):
        return "table"
    objs = json_objects(path, read_text(path, "benchmark result file (vLLM JSON, SGLang JSONL, CSV or Parquet)"))
    if any(sglang.looks_like(o) for o in objs):
        return "sglang"
    if any(vllm.looks_like(o) for o in objs):
        return "vllm"
    raise InputError(path, "file", "not a recognised benchmark log (no vLLM `date/backend/model_id/duration`, no "
                     "SGLang `total_output_tokens_retokenized`)", f"give format= one of: {', '.join(READERS)}")


def read_measured(path: str | Path, fmt: str = "auto", run: int | None = None) -> MeasuredRun:
    """Read and validate a measured run; `fmt` is a key of `READERS` or `auto`."""
    path = Path(path)
    if fmt == "auto":
        fmt = detect(path)
    if fmt not in READERS:
        raise InputError("command line", "format", f"unknown format {fmt!r}", f"use one of: auto, {', '.join(READERS)}")
    return READERS[fmt](path, run)


__all__ = ["READERS", "detect", "read_measured"]
