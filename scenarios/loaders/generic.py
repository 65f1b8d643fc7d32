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

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from inferplan.errors import InputError
from scenarios.loaders.checks import as_numpy, numeric, plain_numbers, raise_zero_lengths, read_csv_text, read_csv_typed
from scenarios.workload import Workload

REQUIRED = ("arrival_s", "prompt_tokens", "output_tokens")
OPTIONAL = ("request_class", "priority", "session_id", "prefix_hashes")


NUMBERS = {  # column -> (whole numbers, minimum) as `numeric` checks them
    "arrival_s": (False, 0.0), "prompt_tokens": (True, 0.0), "output_tokens": (True, 0.0),
    "priority": (True, None), "session_id": (True, -1.0)}
TYPES = {**{c: pa.float64() for c in NUMBERS}, "request_class": pa.string(), "prefix_hashes": pa.string()}


def _parquet(path: Path) -> pa.Table:
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as err:
        raise InputError(path, "file", f"is not a readable Parquet file ({err})", "rewrite it with pyarrow") from None
    missing = [c for c in REQUIRED if c not in table.column_names]
    if missing:
        raise InputError(path, "schema", f"missing column {missing[0]!r} (found: {', '.join(table.column_names)})",
                         f"the file must have columns {', '.join(REQUIRED)}")
    if table.num_rows == 0:
        raise InputError(path, "file", "has no requests", "add at least one row")
    return table


def _typed_columns(path: Path, table: pa.Table | None) -> dict | None:
    """The columns of a plainly well-formed file, parsed by pyarrow (no pandas: most of a trace run's start-up
    was importing it); None for anything `_text_columns` must read, to accept it or to say what is wrong."""
    import pyarrow.compute as pc   # (here: a run that reads no trace never imports it)

    if table is None:
        cols = read_csv_typed(path, TYPES)
    else:
        cols = {}
        for name in TYPES:
            if name in table.column_names:
                column = table.column(name)
                if column.null_count:
                    return None
                if name in NUMBERS:
                    if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
                        return None
                    cols[name] = as_numpy(column, np.float64)
                else:
                    cols[name] = column
    if cols is None or any(c not in cols for c in REQUIRED):
        return None
    out: dict = {}
    for name, (integer, minimum) in NUMBERS.items():
        if name in cols:
            out[name] = plain_numbers(cols[name], integer=integer, minimum=minimum)
            if out[name] is None:
                return None
    if "request_class" in cols:
        labels = cols["request_class"]
        if not (pa.types.is_string(labels.type) or pa.types.is_large_string(labels.type)):
            return None
        # Codes by first appearance, as `pd.factorize` gives them, an empty label being `default`. (Arrow
        # scalars made from Python values would import pandas: the empty label is merged in the dictionary.)
        encoded = pc.dictionary_encode(pc.utf8_trim_whitespace(labels.combine_chunks()))
        names: dict[str, int] = {}
        remap = [names.setdefault(v or "default", len(names)) for v in encoded.dictionary.to_pylist()]
        out["request_class"] = (np.asarray(remap, dtype=np.int64)[as_numpy(encoded.indices, np.int64)],
                                tuple(names))
    if "prefix_hashes" in cols:
        out["prefix_hashes"] = cols["prefix_hashes"].to_pylist()
    return out


def _text_columns(path: Path, table: pa.Table | None) -> dict:
    """The columns read as text, as pandas accepts them, naming the line of the first bad cell."""
    import pandas as pd
    df = table.to_pandas() if table is not None else read_csv_text(path, REQUIRED, fix_columns=", ".join(REQUIRED))
    out: dict = {}
    for name, (integer, minimum) in NUMBERS.items():
        if name in df.columns:
            out[name] = numeric(path, df[name], name, integer=integer, minimum=minimum)
    if "request_class" in df.columns:
        labels = df["request_class"].astype(str).str.strip().replace("", "default")
        codes, uniques = pd.factorize(labels)
        out["request_class"] = (codes, tuple(str(u) for u in uniques))
    if "prefix_hashes" in df.columns:
        out["prefix_hashes"] = df["prefix_hashes"].tolist()
    return out


def _hashes(path: Path, values: list) -> list[np.ndarray]:
    out = []
    for i, v in enumerate(values):
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
    path = Path(path)
    table = _parquet(path) if path.suffix.lower() in (".parquet", ".pq") else None
    cols = _typed_columns(path, table)
    if cols is None:
        cols = _text_columns(path, table)
    prompt, output, raised = raise_zero_lengths(cols["prompt_tokens"], cols["output_tokens"])
    classes, names = cols.get("request_class", (None, ("default",)))
    hashes = _hashes(path, cols["prefix_hashes"]) if "prefix_hashes" in cols else None
    return Workload.from_columns(cols["arrival_s"], prompt, output, request_class=classes, class_names=names,
                                 priority=cols.get("priority"), session_id=cols.get("session_id"),
                                 prefix_hashes=hashes, hash_block_tokens=hash_block_tokens,
                                 source=f"generic:{path}",
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
