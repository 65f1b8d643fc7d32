"""`Columns` (inferplan/columns.py) reads like the dict of columns it replaces, derived columns included, and a
run's request table derived a row group at a time equals the one derived whole."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

from inferplan.columns import Columns, rows_of
from inferplan.labels import Labels
from sim.core.metrics import DERIVED, REQUEST_COLUMNS
from sim.results.schema import REQUEST_TYPES


def _double(c, lo):
    return c["x"] * 2


def _row(c, lo):
    return np.arange(lo, lo + len(c["x"]))


def _table() -> Columns:
    x = np.arange(10.0)
    return Columns({"x": x, "s": Labels(np.arange(10) % 2, ("a", "b"))}, {"x2": _double, "i": _row},
                   ("i", "x", "x2", "s"))


def test_reads_as_a_dict():
    cols = _table()
    assert list(cols) == ["i", "x", "x2", "s"] and len(cols) == 4
    assert "x2" in cols and "y" not in cols
    np.testing.assert_array_equal(cols["x2"], np.arange(10.0) * 2)
    assert cols.get("y") is None
    with pytest.raises(KeyError):
        cols["y"]
    assert sorted(dict(cols)) == ["i", "s", "x", "x2"]


def test_a_stored_column_not_in_the_order_is_not_read():
    cols = Columns({"x": np.zeros(2), "hidden": np.ones(2)}, {}, ("x",))
    with pytest.raises(KeyError):
        cols["hidden"]
    with pytest.raises(KeyError):
        Columns({"x": np.zeros(2)}, {}, ("x", "missing"))


def test_rows_derive_from_the_slices():
    cols = _table()
    part = cols.rows(3, 7)
    assert list(part) == list(cols)
    np.testing.assert_array_equal(part["i"], np.arange(3, 7))
    np.testing.assert_array_equal(part["x2"], cols["x2"][3:7])
    assert part["s"].tolist() == cols["s"][3:7].tolist()
    plain = {"x": np.arange(5)}
    np.testing.assert_array_equal(rows_of(plain, 1, 3)["x"], [1, 2])


def test_pickles():
    back = pickle.loads(pickle.dumps(_table()))
    np.testing.assert_array_equal(back["x2"], _table()["x2"])


def test_request_table_derived_by_row_groups_equals_whole():
    """The recorder's derived columns (request id, TTFT, TPOT, end-to-end) per row group are the whole columns'
    slices, bit for bit (NaN where a request has no first token, one output token, or did not finish)."""
    rng = np.random.default_rng(3)
    n = 1000
    arrival = np.sort(rng.uniform(0, 100, n))
    first = arrival + rng.uniform(0, 2, n)
    finish = first + rng.uniform(0, 30, n)
    first[rng.random(n) < 0.05] = np.nan
    finish[rng.random(n) < 0.1] = np.nan
    stored = {k: np.zeros(n) for k in REQUEST_COLUMNS if k not in DERIVED}
    stored.update(arrival_s=arrival, first_token_s=first, finish_s=finish,
                  output_tokens=rng.integers(1, 5, n).astype(np.int32))
    cols = Columns(stored, DERIVED, REQUEST_COLUMNS)
    assert set(cols) == set(REQUEST_TYPES)
    tpot = cols["tpot_s"]
    assert np.isnan(tpot[stored["output_tokens"] == 1]).all()
    many = stored["output_tokens"] > 1
    np.testing.assert_array_equal(tpot[many], (finish - first)[many] / (stored["output_tokens"][many] - 1))
    for lo in range(0, n, 300):
        part = cols.rows(lo, lo + 300)
        for k in DERIVED:
            np.testing.assert_array_equal(part[k], cols[k][lo:lo + 300], err_msg=k)
