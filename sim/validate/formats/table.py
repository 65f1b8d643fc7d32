"""The generic measured table (CSV with a header row, or Parquet): one row per successful request.

| column | unit | required |
|---|---|---|
| `arrival_s` | s, send time (any origin; shifted so the first is 0) | yes |
| `prompt_tokens`, `output_tokens` | tokens (integers) | yes |
| `ttft_s` | s, send to first token | yes |
| `e2e_s` | s, send to last token | yes |
| `tpot_s` | s, `(e2e - ttft) / (output_tokens - 1)` or your client's own per-request TPOT | no (derived) |

Extra columns are ignored. Leave failed requests out of the table.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np

from inferplan.errors import InputError
from sim.validate.formats.checks import read_text, to_number
from sim.validate.measured import MeasuredRun, finish

REQUIRED = ("arrival_s", "prompt_tokens", "output_tokens", "ttft_s", "e2e_s")
OPTIONAL = ("tpot_s",)
INTEGER = ("prompt_tokens", "output_tokens")
FIX_COLUMNS = f"columns: {', '.join(REQUIRED)} (optional {', '.join(OPTIONAL)}); see docs/validation.md"


def read(path: Path, run: int | None = None) -> MeasuredRun:
    if path.suffix == ".parquet":
        cols, where, version = _parquet_columns(path)
    else:
        cols, where, version = _csv_columns(path)
    n = len(cols["arrival_s"])
    if n == 0:
        raise InputError(path, "rows", "the table has a header but no rows", "add one row per successful request")
    values = {}
    for name in [c for c in (*REQUIRED, *OPTIONAL) if c in cols]:
        arr = np.empty(n, dtype=np.float64)
        for i, v in enumerate(cols[name]):
            if name == "tpot_s" and (v is None or str(v).strip() == ""):
                arr[i] = np.nan  # optional per row: one-token outputs have no TPOT
                continue
            arr[i] = to_number(path, f"{name} ({where(i)})", v, integer=name in INTEGER,
                               non_negative=name != "arrival_s")
        values[name] = arr
    ttft, e2e = values["ttft_s"], values["e2e_s"]
    bad = np.flatnonzero(e2e + 1e-9 < ttft)
    if bad.size:
        i = int(bad[0])
        raise InputError(path, f"e2e_s ({where(i)})", f"{e2e[i]} s is shorter than ttft_s {ttft[i]} s",
                         "e2e_s runs from send to the last token, so it is >= ttft_s")
    return finish(path, "table", version, index=np.arange(n), arrival_s=values["arrival_s"],
                  prompt=values["prompt_tokens"], output=values["output_tokens"], ttft=ttft, e2e=e2e,
                  tpot=values.get("tpot_s"), sent=n, ok=np.ones(n, dtype=bool), deployment={}, client={},
                  aggregates={}, notes=["arrivals from the arrival_s column"])


def _check_header(path: Path, names) -> None:
    missing = [c for c in REQUIRED if c not in names]
    if missing:
        raise InputError(path, missing[0], "missing column", FIX_COLUMNS)


def _csv_columns(path: Path):
    text = read_text(path, "CSV with a header row (" + FIX_COLUMNS + ")")
    reader = csv.reader(io.StringIO(text))
    rows = [(lineno, row) for lineno, row in enumerate(reader, start=1) if any(cell.strip() for cell in row)]
    header = [h.strip() for h in rows[0][1]]
    _check_header(path, header)
    data = rows[1:]
    for lineno, row in data:
        if len(row) != len(header):
            raise InputError(path, f"line {lineno}", f"has {len(row)} cells, the header has {len(header)}",
                             "give one cell per column")
    cols = {name: [row[j] for _, row in data] for j, name in enumerate(header)}
    return cols, (lambda i: f"line {data[i][0]}"), "csv"


def _parquet_columns(path: Path):
    import pyarrow.parquet as pq
    from pyarrow import ArrowInvalid

    if not path.is_file():
        raise InputError(path, "path", "file not found", "give a Parquet table (" + FIX_COLUMNS + ")")
    try:
        table = pq.read_table(path)
    except (ArrowInvalid, OSError) as err:
        raise InputError(path, "file", f"is not a readable Parquet file ({str(err).splitlines()[0]})",
                         "give a Parquet table (" + FIX_COLUMNS + ")") from None
    _check_header(path, table.column_names)
    cols = {name: table.column(name).to_pylist() for name in table.column_names if name in (*REQUIRED, *OPTIONAL)}
    return cols, (lambda i: f"row {i}"), "parquet"
