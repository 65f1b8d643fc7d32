"""Shared validation for trace loaders: every problem becomes a one-line `InputError` naming file, line and fix.

Line numbers are the file's own (1-based; a CSV header is line 1, so data row i is line i + 2), so a user can
jump to them in an editor.
"""
from __future__ import annotations

import gzip
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

import numpy as np
import pyarrow as pa

from inferplan.errors import InputError

if TYPE_CHECKING:  # (pandas is imported where a trace is read: a run without one never loads it)
    import pandas as pd


UNREADABLE = (OSError, EOFError, zlib.error)  # what a damaged gzip file raises while it is read


def open_text(path: Path) -> IO[str]:
    """A text stream over `path`, decompressed on the fly when the name ends in `.gz` (the shipped traces)."""
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")


def read_csv_text(path: Path, required: Sequence[str], *, fix_columns: str) -> pd.DataFrame:
    """Read a headed CSV (gzipped when named `*.gz`) with every cell as text; reject empty files and missing columns."""
    import pandas as pd
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True, compression="infer")
    except pd.errors.EmptyDataError:
        raise InputError(path, "file", "is empty", f"export the trace with its header ({fix_columns})") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as err:
        raise InputError(path, "file", f"is not a readable CSV ({str(err).splitlines()[0]})",
                         "check the delimiter (comma) and quoting") from None
    except UNREADABLE as err:
        raise InputError(path, "file", f"cannot be read ({err})", "restore the file from its source") from None
    df.columns = [str(c).strip() for c in df.columns]
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise InputError(path, "header", f"missing column {missing[0]!r} (found: {', '.join(df.columns)})",
                         f"the header must contain {fix_columns}")
    if len(df) == 0:
        raise InputError(path, "file", "has a header but no requests", "add at least one data row")
    return df


def read_csv_typed(path: Path, types: dict[str, pa.DataType]) -> dict[str, np.ndarray | pa.ChunkedArray] | None:
    """The fast path for a well-formed headed CSV (gzipped when named `*.gz`): pyarrow parses the `types` columns
    that are present, numbers as float64 numpy arrays and text as Arrow strings, without pandas. None whenever the
    file is not plainly well formed (unreadable, ragged, an empty or non-numeric cell, padded names or cells, no
    rows): the caller then reads it as text (`read_csv_text`, `numeric`), which accepts what pandas accepts and names
    the file, line and fix of any problem. A caller checks the values it needs (`plain_numbers`) the same way."""
    import pyarrow.csv as pacsv

    try:   # (no null values: an empty cell fails to convert; a column absent from the header comes back all null)
        table = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
            column_types=types, include_columns=list(types), include_missing_columns=True, null_values=[],
            strings_can_be_null=False, quoted_strings_can_be_null=False))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, *UNREADABLE):
        return None
    if table.num_rows == 0:
        return None
    out: dict[str, np.ndarray | pa.ChunkedArray] = {}
    for name in types:
        column = table.column(name)
        if column.null_count == table.num_rows:   # not in the header
            continue
        if column.null_count:
            return None
        out[name] = as_numpy(column, np.float64) if pa.types.is_floating(column.type) else column
    return out


def as_numpy(column: pa.ChunkedArray | pa.Array, dtype: type = np.float64) -> np.ndarray:
    """A null-free numeric column as a numpy array of `dtype`, viewed over its Arrow buffer (read-only).
    Not `to_numpy`: pyarrow imports pandas there (about 0.2 s), which a trace run otherwise never needs."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    arr = arr.cast(pa.from_numpy_dtype(dtype))
    return np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr), offset=arr.offset * np.dtype(dtype).itemsize)


def plain_numbers(x: np.ndarray, *, integer: bool = False, minimum: float | None = 0.0) -> np.ndarray | None:
    """`x` as `numeric` returns it when every value passes `numeric`'s checks (finite, whole when `integer`, at least
    `minimum`); None otherwise (the text path then names the first bad cell)."""
    if not np.isfinite(x).all() or (integer and (x != np.round(x)).any()) or \
            (minimum is not None and (x < minimum).any()):
        return None
    return x.astype(np.int64) if integer else x


def numeric(path: Path, values: pd.Series, column: str, *, first_line: int = 2, integer: bool = False,
            minimum: float | None = 0.0) -> np.ndarray:
    """Convert a text column to float64 (or int64), naming the first bad cell's line."""
    import pandas as pd
    x = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~np.isfinite(x)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(path, f"line {i + first_line}, column {column}", f"{values.iloc[i]!r} is not a number",
                         f"write a number in {column}")
    if integer:
        frac = x != np.round(x)
        if frac.any():
            i = int(np.argmax(frac))
            raise InputError(path, f"line {i + first_line}, column {column}", f"{values.iloc[i]!r} is not a whole "
                             "number of tokens", f"write an integer in {column}")
    if minimum is not None and (x < minimum).any():
        i = int(np.argmax(x < minimum))
        raise InputError(path, f"line {i + first_line}, column {column}", f"{values.iloc[i]} is negative"
                         if minimum == 0 else f"{values.iloc[i]} is below {minimum:g}",
                         f"{column} must be >= {minimum:g}; fix or drop the row")
    return x.astype(np.int64) if integer else x


def check_sorted(path: Path, t: np.ndarray, column: str, *, first_line: int = 2, strict: bool = False,
                 shown: pd.Series | None = None) -> None:
    """Reject times that go back (or, when `strict`, repeat); `shown` gives the cells as written, for the message."""
    d = np.diff(t)
    bad = d <= 0 if strict else d < 0
    if bad.any():
        i = int(np.argmax(bad)) + 1
        what = "repeats" if d[i - 1] == 0 else "goes back in time"
        now, before = (shown.iloc[i], shown.iloc[i - 1]) if shown is not None else (f"{t[i]:g}", f"{t[i - 1]:g}")
        raise InputError(path, f"line {i + first_line}, column {column}", f"{what} ({now} after {before})",
                         f"sort the rows by {column}" + (" and remove duplicates" if strict else ""))


def raise_zero_lengths(prompt: np.ndarray, output: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Lengths of 0 become 1 (a Workload needs ≥ 1 token each side); returns how many rows were raised."""
    zero = (prompt == 0) | (output == 0)
    return np.maximum(prompt, 1), np.maximum(output, 1), int(zero.sum())
