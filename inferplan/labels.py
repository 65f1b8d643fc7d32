"""A string column stored as small integer codes into its few distinct labels (Arrow's dictionary array).

A run's string columns (status, pool, request class, reject reason, prefill pool) hold a handful of distinct
values over millions of rows: as a numpy object array each row is an 8-byte pointer; as `Labels` it is a 1- or
2-byte code. It reads like the object array it replaces: `col == "completed"` is a boolean mask, `col[mask]` and
`col[lo:hi]` are `Labels` of those rows, `col[i]` and iteration give `str`, `tolist()` the strings, `distinct()` the set of them, and
`np.asarray(col)` the object array (tests/test_labels.py). The run folder's writer turns the codes into Arrow
strings one row group at a time (sim/results/arrow_columns.py `labels_column`).
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np


class Labels:
    """Row i is `names[codes[i]]`. `codes` is an integer array (not copied); `names` the labels it indexes."""

    __slots__ = ("codes", "names")

    def __init__(self, codes: np.ndarray, names: tuple[str, ...] | list[str]) -> None:
        self.codes = codes
        self.names = tuple(names)

    @classmethod
    def of(cls, values) -> "Labels":
        """Labels of strings (a list or an object array), names in order of first appearance."""
        values = list(values)
        names = list(dict.fromkeys(values))
        index = {s: k for k, s in enumerate(names)}
        return cls(np.array([index[s] for s in values], dtype=np.int32), names)

    def __len__(self) -> int:
        return int(self.codes.shape[0])

    def _codes_of(self, label: str) -> list[int]:
        return [k for k, s in enumerate(self.names) if s == label]

    def __eq__(self, other: object) -> Any:  # type: ignore[override]  # (elementwise, as numpy's)
        if isinstance(other, str):
            ks = self._codes_of(other)
            if len(ks) == 1:
                return self.codes == ks[0]
            return np.isin(self.codes, ks) if ks else np.zeros(len(self), dtype=bool)
        return np.asarray(self) == (np.asarray(other) if isinstance(other, Labels) else other)

    def __ne__(self, other: object) -> Any:  # type: ignore[override]
        return ~(self == other)

    __hash__ = None  # type: ignore[assignment]  # (mutable codes, elementwise ==)

    def __getitem__(self, key) -> Any:
        if isinstance(key, (int, np.integer)):
            return self.names[int(self.codes[key])]
        return Labels(self.codes[key], self.names)

    def distinct(self) -> set[str]:
        """The labels the rows hold (not every name need be used)."""
        names = self.names
        return {names[k] for k in np.unique(self.codes).tolist()}

    def __iter__(self) -> Iterator[str]:
        names = self.names
        return (names[k] for k in self.codes.tolist())

    def tolist(self) -> list[str]:
        names = self.names
        return [names[k] for k in self.codes.tolist()]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = np.array(self.names, dtype=object)[self.codes]
        return out if dtype is None else out.astype(dtype)

    def __repr__(self) -> str:
        head = ", ".join(repr(s) for s in self[:6])
        return f"Labels([{head}{', ...' if len(self) > 6 else ''}], {len(self)} rows, names={self.names})"
