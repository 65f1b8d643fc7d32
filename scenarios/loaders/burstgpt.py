"""BurstGPT CSV (HPMLL/BurstGPT): `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`.

`Timestamp` is seconds from the start of the collection; arrivals become seconds from the first kept row.
`Request tokens` → prompt, `Response tokens` → output. A response of 0 tokens is a failed request: dropped by
default (`drop_failed`), else raised to 1. `models` / `log_types` keep only the listed values (e.g. `ChatGPT`,
`GPT-4`; `Conversation log`, `API log`). Rows must be in time order.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from inferplan.errors import InputError
from scenarios.loaders.checks import check_sorted, numeric, raise_zero_lengths, read_csv_text
from scenarios.workload import Workload

COLUMNS = ("Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type")


def load_burstgpt(path: str | Path, *, models: Sequence[str] | None = None,
                  log_types: Sequence[str] | None = None, drop_failed: bool = True) -> Workload:
    """Load a BurstGPT CSV as a Workload (seconds from the first kept request; tokens)."""
    path = Path(path)
    df = read_csv_text(path, COLUMNS, fix_columns=",".join(COLUMNS))
    t = numeric(path, df["Timestamp"], "Timestamp", minimum=None)
    check_sorted(path, t, "Timestamp")
    prompt = numeric(path, df["Request tokens"], "Request tokens", integer=True)
    output = numeric(path, df["Response tokens"], "Response tokens", integer=True)
    keep = np.ones(len(df), dtype=bool)
    if models is not None:
        keep &= df["Model"].isin(list(models)).to_numpy()
    if log_types is not None:
        keep &= df["Log Type"].isin(list(log_types)).to_numpy()
    failed = keep & (output == 0)
    if drop_failed:
        keep &= output > 0
    if not keep.any():
        raise InputError(path, "rows", "no request is left after the models/log_types/drop_failed filters",
                         f"models present: {', '.join(sorted(set(df['Model'])))}")
    prompt, output, raised = raise_zero_lengths(prompt[keep], output[keep])
    t = t[keep]
    return Workload.from_columns(t - t[0], prompt, output, source=f"burstgpt:{path}",
                                 metadata={"format": "burstgpt", "failed_rows": int(failed.sum()),
                                           "dropped_failed": bool(drop_failed), "raised_zero_lengths": raised})
