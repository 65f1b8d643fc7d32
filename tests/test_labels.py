"""`Labels` (inferplan/labels.py) reads like the object array of strings it replaces in a run's request columns,
and the run folder's strings built from its codes equal those built from the strings."""
from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from inferplan.labels import Labels
from sim.results.arrow_columns import string_column

NAMES = ("completed", "rejected", "unfinished")


def _pair(n: int = 200, seed: int = 1):
    codes = np.random.default_rng(seed).integers(0, len(NAMES), n).astype(np.int8)
    return Labels(codes, NAMES), np.array(NAMES, dtype=object)[codes]


def test_reads_as_the_object_array():
    lab, obj = _pair()
    assert len(lab) == len(obj)
    for s in (*NAMES, "absent"):
        assert np.array_equal(lab == s, obj == s)
        assert np.array_equal(lab != s, obj != s)
    mask = obj == "rejected"
    assert lab[mask].tolist() == obj[mask].tolist()
    assert list(lab[10:40]) == list(obj[10:40])
    assert lab[7] == obj[7] and isinstance(lab[7], str)
    assert lab[np.int64(3)] == obj[3]
    assert np.array_equal(np.asarray(lab), obj) and np.asarray(lab).dtype == object
    assert sorted(set(lab.tolist())) == sorted(set(obj.tolist()))
    assert np.array_equal(lab == Labels.of(obj.tolist()), np.ones(len(obj), dtype=bool))


def test_repeated_names_match_every_code():
    lab = Labels(np.array([0, 1, 2, 1]), ("a", "b", "a"))
    assert (lab == "a").tolist() == [True, False, True, False]
    assert lab.tolist() == ["a", "b", "a", "b"]


@pytest.mark.parametrize("names", [NAMES, ("", "main", "ünïcode"), ("",)])
def test_arrow_strings_from_codes_equal_those_from_strings(names):
    codes = np.random.default_rng(2).integers(0, len(names), 3000).astype(np.int16)
    lab, obj = Labels(codes, names), np.array(names, dtype=object)[codes]
    ours, theirs = string_column(lab), pa.array(obj.tolist(), type=pa.string())
    ours.validate(full=True)
    assert ours.equals(theirs)
    assert string_column(lab[1000:1500]).equals(theirs[1000:1500])

    def parquet(a: pa.Array) -> bytes:
        buf = io.BytesIO()
        pq.write_table(pa.table({"s": a}), buf, compression="zstd", use_dictionary=True, write_statistics=True)
        return buf.getvalue()
    assert parquet(ours) == parquet(theirs)
