"""Azure LLM inference trace 2023 (Splitwise): `TIMESTAMP,ContextTokens,GeneratedTokens`.

`TIMESTAMP` is wall-clock (`2023-11-16 18:17:03.9799600`, no time zone); arrivals become seconds from the first
row. `ContextTokens` → prompt tokens, `GeneratedTokens` → output tokens. Rows must be in time order (ties are
fine: several requests can share a timestamp).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from inferplan.errors import InputError
from scenarios.loaders.checks import check_sorted, numeric, raise_zero_lengths, read_csv_text
from scenarios.workload import Workload

COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


def load_azure(path: str | Path) -> Workload:
    """Load an Azure 2023 CSV as a Workload (seconds from the first request; tokens)."""
    import pandas as pd
    path = Path(path)
    df = read_csv_text(path, COLUMNS, fix_columns=",".join(COLUMNS))
    ts = pd.to_datetime(df["TIMESTAMP"], format="ISO8601", errors="coerce")
    if ts.isna().any():
        i = int(np.argmax(ts.isna().to_numpy()))
        raise InputError(path, f"line {i + 2}, column TIMESTAMP", f"{df['TIMESTAMP'].iloc[i]!r} is not a date-time",
                         "write e.g. 2023-11-16 18:17:03.9799600")
    ns = ts.to_numpy().astype("datetime64[ns]").astype(np.int64)
    check_sorted(path, (ns - ns[0]).astype(np.float64), "TIMESTAMP", shown=df["TIMESTAMP"])
    prompt = numeric(path, df["ContextTokens"], "ContextTokens", integer=True)
    output = numeric(path, df["GeneratedTokens"], "GeneratedTokens", integer=True)
    prompt, output, raised = raise_zero_lengths(prompt, output)
    arrival = (ns - ns[0]) / 1e9
    return Workload.from_columns(arrival, prompt, output, source=f"azure:{path}",
                                 metadata={"format": "azure", "raised_zero_lengths": raised})
