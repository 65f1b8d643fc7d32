"""The run folder's Arrow columns built from buffers equal `pa.array`'s, down to the Parquet bytes."""
import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sim.results.arrow_columns import arrow_column, string_column


def _parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd", use_dictionary=True, write_statistics=True)
    return buf.getvalue()


def test_columns_equal_pa_array_and_write_the_same_bytes():
    rng = np.random.default_rng(3)
    n = 5000
    labels = np.array(["completed", "rejected", "", "ünicode", "kv_full"], dtype=object)
    cols = {
        "f": (rng.random(n) * np.where(rng.random(n) < 0.1, np.nan, 1.0), pa.float64()),
        "i64": (rng.integers(-5, 1 << 40, n), pa.int64()),
        "i32": (rng.integers(-1, 100, n).astype(np.int32), pa.int32()),
        "b": (rng.random(n) < 0.3, pa.bool_()),
        "s": (labels[rng.integers(0, len(labels), n)], pa.string()),
        "list_s": (["a", "bb"] * (n // 2), pa.string()),
        "list_f": ((rng.random(n)).tolist(), pa.float64()),
    }
    ours = pa.table({k: arrow_column(v, t) for k, (v, t) in cols.items()})
    theirs = pa.table({k: pa.array(v, type=t) for k, (v, t) in cols.items()})
    ours.validate(full=True)
    assert ours.schema == theirs.schema
    assert all(ours[k].equals(theirs[k]) for k in cols if k != "f")  # (f: NaN != NaN for `equals`)
    assert np.array_equal(ours["f"].to_numpy(), cols["f"][0], equal_nan=True)
    assert _parquet(ours) == _parquet(theirs)


def test_strings_empty_and_single():
    assert string_column(np.array([], dtype=object)).to_pylist() == []
    assert string_column(np.array([""] * 3, dtype=object)).to_pylist() == ["", "", ""]
    assert string_column(["x"]).to_pylist() == ["x"]
