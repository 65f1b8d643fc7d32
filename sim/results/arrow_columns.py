"""numpy columns as Arrow arrays, built from their buffers: what `sim.results.write` hands the Parquet writer.

`pa.array` imports pandas on its first call (about 0.3 s of every run) and converts a string column one Python
object at a time; these build the same arrays (equal Parquet bytes, tests/sim/test_arrow_columns.py) from the
numpy buffers: numbers without a copy, booleans bit-packed, strings as offsets and bytes from their few
distinct labels.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from inferplan.labels import Labels

_NUMPY = {pa.int64(): np.int64, pa.int32(): np.int32, pa.float64(): np.float64}


def arrow_column(values, type_: pa.DataType) -> pa.Array:
    """`values` (a numpy array, a list, or `Labels` for a string) as a non-null Arrow array of `type_` (int64,
    int32, float64, bool, string)."""
    if type_ == pa.string():
        return string_column(values)
    if type_ == pa.bool_():
        bits = np.packbits(np.asarray(values, dtype=bool), bitorder="little")
        return pa.Array.from_buffers(type_, len(values), [None, pa.py_buffer(bits)])
    data = np.ascontiguousarray(np.asarray(values, dtype=_NUMPY[type_]))
    return pa.Array.from_buffers(type_, len(data), [None, pa.py_buffer(data)])


def string_column(values) -> pa.Array:
    """Strings (`Labels`, a numpy object array or a list of str) as an Arrow string array. The run's string columns
    hold a few distinct labels (status, pool, class, reject reason), so each label is encoded once and rows are
    gathered by code."""
    if isinstance(values, Labels):
        return labels_column(values.codes, list(values.names))
    labels = list(dict.fromkeys(values.tolist() if isinstance(values, np.ndarray) else values))
    values = np.asarray(values, dtype=object)
    codes = np.zeros(len(values), dtype=np.intp)
    for k, label in enumerate(labels[1:], start=1):
        codes[values == label] = k
    return labels_column(codes, labels)


def labels_column(codes: np.ndarray, labels: list[str]) -> pa.Array:
    """Row i is `labels[codes[i]]`, as an Arrow string array (int32 offsets)."""
    encoded = [s.encode() for s in labels]
    sizes = np.array([len(b) for b in encoded] or [0], dtype=np.int64)
    row_sizes = sizes[codes]
    ends = np.cumsum(row_sizes)
    total = int(ends[-1]) if len(ends) else 0
    if total >= 2**31:
        raise ValueError(f"a string column of {total:,} bytes exceeds Arrow's int32 offsets")
    offsets = np.zeros(len(codes) + 1, dtype=np.int32)
    offsets[1:] = ends
    data = np.empty(total, dtype=np.uint8)
    starts = offsets[:-1]
    for k, b in enumerate(encoded):  # each label's bytes into the rows that hold it, one byte position at a time
        if b:
            at = starts[codes == k]
            for j, byte in enumerate(b):
                data[at + j] = byte
    return pa.Array.from_buffers(pa.string(), len(codes), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
