"""A table of equal-length columns, some stored and some derived from the stored ones each time they are read.

A run's request table has 19 columns over up to millions of rows; four of them (request id, TTFT, TPOT, end-to-end
latency) are arithmetic on the others. Stored, they would cost 32 bytes a request (320 MB at 10 M requests) that
no reader needs at once: the summary reads each for a moment, the run folder's writer a row group at a time
(`rows(lo, hi)`, derived from the slices). It reads like the dict it replaces: `cols[name]`, `name in cols`,
iteration in column order, `len(cols)` the number of columns (tests/test_columns.py).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

# A derived column: its values for the rows of `stored` (a slice of the stored columns starting at row `lo`).
Derive = Callable[[Mapping[str, Any], int], Any]


class Columns(Mapping):
    """Columns named in `order`: those in `derived` computed by their function on every read, the rest `stored`
    (numpy arrays, or `inferplan.labels.Labels`, anything that slices by rows)."""

    __slots__ = ("_stored", "_derived", "_order")

    def __init__(self, stored: dict[str, Any], derived: dict[str, Derive], order: tuple[str, ...]) -> None:
        missing = [k for k in order if k not in stored and k not in derived]
        if missing:
            raise KeyError(f"no stored or derived column {missing}")
        self._stored, self._derived, self._order = stored, derived, tuple(order)

    def __getitem__(self, name: str) -> Any:
        derive = self._derived.get(name)
        if derive is not None:
            return derive(self._stored, 0)
        if name not in self._order:
            raise KeyError(name)
        return self._stored[name]

    def __contains__(self, name: object) -> bool:  # (Mapping's would compute a derived column to answer)
        return name in self._order

    def __iter__(self) -> Iterator[str]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)

    def rows(self, lo: int, hi: int) -> dict[str, Any]:
        """Every column's rows lo..hi: the stored ones sliced, the derived ones computed from those slices (the
        same values as slicing the whole derived column: they are row by row)."""
        part = {k: v[lo:hi] for k, v in self._stored.items()}
        return {k: (self._derived[k](part, lo) if k in self._derived else part[k]) for k in self._order}


def rows_of(cols: Mapping[str, Any], lo: int, hi: int) -> dict[str, Any]:
    """Rows lo..hi of a column table: `Columns.rows`, or any mapping's columns sliced."""
    if isinstance(cols, Columns):
        return cols.rows(lo, hi)
    return {k: cols[k][lo:hi] for k in cols}
