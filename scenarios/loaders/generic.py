"""inferplan's own trace format, CSV or Parquet: one row per request.

| column | required | type | meaning |
|---|---|---|---|
| `arrival_s` | yes | float ≥ 0 | arrival time, seconds from the start of the window |
| `prompt_tokens` | yes | int ≥ 1 (0 is raised to 1) | prompt length |
| `output_tokens` | yes | int ≥ 1 (0 is raised to 1) | output length |
| `request_class` | no | text | class name (default `default`) |
| `priority` | no | int | higher is more urgent (default 0) |
| `session_id` | no | int | -1 for none (default -1) |
| `prefix_hashes` | no | Parquet: list<int64>; CSV: space-separated integers | prompt block hashes |

Rows may be in any order; they are sorted stably by `arrival_s` (ties keep file order, which keeps a session's
turns in order). `hash_block_tokens` is not a column: pass it to the loader (default 512). `save_workload` writes
the same format, so a generated workload round-trips.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from inferplan.errors import InputError
from scenarios.loaders.checks import numeric, raise_zero_lengths, read_csv_text
from scenarios.workload import Workload

if TYPE_CHECKING:  # (pandas is imported where a trace is read: a run without one never loads it)
    import pandas as pd

REQUIRED = ("arrival_s", "prompt_tokens", "output_tokens")
OPTIONAL = ("request_class", "priority", "session_id", "prefix_hashes")


def _read(path: Path) -> pd.DataFrame:
    if path.suffix.lower() in (".parquet", ".pq"):
        try:
            table = pq.read_table(path)
        except (pa.ArrowInvalid, OSError) as err:
            raise InputError(path, "file", f"is not a readable Parquet file ({err})",
                             "rewrite it with pyarrow") from None
        df = table.to_pandas()
        missing = [c for c in REQUIRED if c not in df.columns]
        if missing:
            raise InputError(path, "schema", f"missing column {missing[0]!r} (found: {', '.join(df.columns)})",
                             f"the file must have columns {', '.join(REQUIRED)}")
        if len(df) == 0:
            raise InputError(path, "file", "has no requests", "add at least one row")
        return df
    return read_csv_text(path, REQUIRED, fix_columns=", ".join(REQUIRED))


def _hashes(path: Path, values: pd.Series) -> list[np.ndarray]:
    out = []
    for i, v in enumerate(values.tolist()):
        try:
            if isinstance(v, str):
                out.append(np.array([int(x) for x in v.split()], dtype=np.int64))
            else:
                out.append(np.asarray([] if v is None else v, dtype=np.int64))
        except (TypeError, ValueError):
            raise InputError(path, f"line {i + 2}, column prefix_hashes", f"{v!r} is not a list of integers",
                             "write space-separated integers (CSV) or a list<int64> column (Parquet)") from None
    return out


def load_generic(path: str | Path, *, hash_block_tokens: int = 512) -> Workload:
    """Load a CSV (`.csv`) or Parquet (`.parquet`) file in the documented columns."""
    import pandas as pd
    path = Path(path)
    df = _read(path)
    arrival = numeric(path, df["arrival_s"], "arrival_s")
    prompt = numeric(path, df["prompt_tokens"], "prompt_tokens", integer=True)
    output = numeric(path, df["output_tokens"], "output_tokens", integer=True)
    prompt, output, raised = raise_zero_lengths(prompt, output)
    classes, names = None, ("default",)
    if "request_class" in df.columns:
        labels = df["request_class"].astype(str).str.strip().replace("", "default")
        codes, uniques = pd.factorize(labels)
        classes, names = codes, tuple(str(u) for u in uniques)
    priority = numeric(path, df["priority"], "priority", integer=True, minimum=None) if "priority" in df else None
    session = numeric(path, df["session_id"], "session_id", integer=True, minimum=-1) if "session_id" in df else None
    hashes = _hashes(path, df["prefix_hashes"]) if "prefix_hashes" in df.columns else None
    return Workload.from_columns(arrival, prompt, output, request_class=classes, class_names=names,
                                 priority=priority, session_id=session, prefix_hashes=hashes,
                                 hash_block_tokens=hash_block_tokens, source=f"generic:{path}",
                                 metadata={"format": "generic", "raised_zero_lengths": raised})


def save_workload(wl: Workload, path: str | Path) -> Path:
    """Write `wl` as CSV or Parquet (by suffix) in the generic format; `load_generic` reads it back."""
    import pandas as pd
    path = Path(path)
    cols = {"arrival_s": wl.arrival_s, "prompt_tokens": wl.prompt_tokens, "output_tokens": wl.output_tokens,
            "request_class": np.asarray(wl.class_names, dtype=object)[wl.request_class],
            "priority": wl.priority, "session_id": wl.session_id}
    if path.suffix.lower() in (".parquet", ".pq"):
        table = pa.table(cols)
        if wl.prefix_hashes is not None:
            table = table.append_column("prefix_hashes", pa.array([h.tolist() for h in wl.prefix_hashes],
                                                                   type=pa.list_(pa.int64())))
        pq.write_table(table, path)
    else:
        df = pd.DataFrame(cols)
        if wl.prefix_hashes is not None:
            df["prefix_hashes"] = [" ".join(map(str, h.tolist())) for h in wl.prefix_hashes]
        df.to_csv(path, index=False, float_format="%.9f")
    return path
