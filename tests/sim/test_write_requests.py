"""`requests.parquet` is written one row group at a time from slices of the columns (sim/results/write.py
`write_requests`): the file must be the one a whole-table `pq.write_table` with the same row-group size gives."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sim.results.arrow_columns import arrow_column
from sim.results.schema import REQUEST_TYPES
from sim.results.write import _OPTIONS, ROWS_PER_GROUP, write_requests


def _columns(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Request columns of every schema type, with labels that differ between row groups (a group may lack one)."""
    rng = np.random.default_rng(seed)
    cols: dict[str, np.ndarray] = {}
    for k, t in REQUEST_TYPES.items():
        if t == pa.string():
            labels = np.array(["", "completed", "rejected", f"{k}-é"], dtype=object)
            codes = rng.integers(0, 4, n)
            codes[: n // 3] = 0  # (the first group holds only "" in a few columns)
            cols[k] = labels[codes]
        elif t == pa.bool_():
            cols[k] = rng.random(n) < 0.3
        elif t == pa.float64():
            v = rng.random(n)
            v[rng.random(n) < 0.1] = np.nan
            cols[k] = v
        else:
            cols[k] = rng.integers(-1, 1000, n).astype(np.int32 if t == pa.int32() else np.int64)
    return cols


def _whole_table(cols: dict, path, rows_per_group: int) -> None:
    table = pa.table({k: arrow_column(cols[k], t) for k, t in REQUEST_TYPES.items()})
    pq.write_table(table, path, row_group_size=rows_per_group, **_OPTIONS)


@pytest.mark.parametrize("n, rows_per_group", [(2500, 1000), (2000, 1000), (999, 1000), (1, 1000), (0, 1000)])
def test_row_groups_give_the_whole_table_file(tmp_path, n, rows_per_group):
    cols = _columns(n)
    write_requests(cols, tmp_path / "groups.parquet", rows_per_group)
    _whole_table(cols, tmp_path / "whole.parquet", rows_per_group)
    assert (tmp_path / "groups.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()
    back = pq.read_table(tmp_path / "groups.parquet")
    assert back.schema == pa.schema(list(REQUEST_TYPES.items()))
    assert pq.ParquetFile(tmp_path / "groups.parquet").metadata.num_row_groups == max(1, -(-n // rows_per_group))
    for k in ("status", "pool", "fallback", "instance"):
        assert back[k].to_pylist() == cols[k].tolist()
    assert np.array_equal(back["arrival_s"].to_numpy(), cols["arrival_s"], equal_nan=True)


def test_default_groups_are_pyarrows_default(tmp_path):
    """The default group size is write_table's own default, so a run's file is what the whole-table write gave."""
    cols = _columns(300)
    write_requests(cols, tmp_path / "groups.parquet")
    table = pa.table({k: arrow_column(cols[k], t) for k, t in REQUEST_TYPES.items()})
    pq.write_table(table, tmp_path / "whole.parquet", **_OPTIONS)
    assert (tmp_path / "groups.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()
    assert ROWS_PER_GROUP == 1024 * 1024
