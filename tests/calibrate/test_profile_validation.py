"""A wrong, stale, corrupt or incomplete profile is refused with a one-line error naming what is wrong."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from calibrate.profile import METADATA_KEY, SCHEMA_VERSION, load_profile, write_profile
from inferplan.errors import InputError

META = {"hardware": "cpu_local", "device": "cpu", "date": "2026-11-30",
        "peaks": {"flops_per_s": {"bf16": 4e11}, "mem_bytes_per_s": 3.2e10}}
ROWS = [{"op": "gemm", "dtype": "bf16", "roofline_s": r, "efficiency": e, "launch_s": 5e-6}
        for r, e in ((1e-6, 0.2), (1e-4, 0.6), (1e-2, 0.8))]


@pytest.fixture
def profile(tmp_path):
    return write_profile(tmp_path / "cpu_local.parquet", ROWS, META)


def rewrite(path, table=None, meta=None):
    table = table if table is not None else pq.read_table(path)
    if meta is not None:
        table = table.replace_schema_metadata({METADATA_KEY: json.dumps(meta).encode()})
    pq.write_table(table, path)


def test_valid_profile_round_trips(profile):
    p = load_profile(profile, expected_hardware="cpu_local")
    assert p.curve("gemm", "bf16").efficiency == (0.2, 0.6, 0.8)
    assert p.peak_flops_per_s == {"bf16": 4e11}


def test_wrong_hardware(profile):
    with pytest.raises(InputError, match=r"metadata.hardware: profile is for 'cpu_local', the pool runs on 'h200'"):
        load_profile(profile, expected_hardware="h200")


def test_stale_schema_version(profile):
    meta = json.loads(pq.read_table(profile).schema.metadata[METADATA_KEY])
    rewrite(profile, meta={**meta, "schema_version": SCHEMA_VERSION - 1})
    with pytest.raises(InputError, match=rf"schema_version: is {SCHEMA_VERSION - 1}, .*stale profile.*python -m "
                                         "calibrate"):
        load_profile(profile)


def test_corrupt_file(profile):
    profile.write_bytes(profile.read_bytes()[: len(profile.read_bytes()) // 2])
    with pytest.raises(InputError, match="file: not a readable Parquet file"):
        load_profile(profile)


def test_missing_column(profile):
    rewrite(profile, table=pq.read_table(profile).drop(["launch_s"]))
    with pytest.raises(InputError, match="launch_s: column missing"):
        load_profile(profile)


def test_missing_metadata_and_bad_values(profile, tmp_path):
    table = pq.read_table(profile)
    bare = tmp_path / "bare.parquet"
    pq.write_table(table.replace_schema_metadata({}), bare)
    with pytest.raises(InputError, match="no inferplan provenance metadata"):
        load_profile(bare)
    bad = write_profile(tmp_path / "bad.parquet", [dict(ROWS[0], efficiency=3.0)], META)
    with pytest.raises(InputError, match=r"row 0.efficiency: must be in \(0, 2\], got 3.0"):
        load_profile(bad)
    unknown = tmp_path / "unknown.parquet"
    cols = table.to_pydict()
    cols["op"] = ["conv"] * len(cols["op"])
    pq.write_table(pa.table(cols, schema=table.schema), unknown)
    with pytest.raises(InputError, match="unknown op 'conv'; valid: gemm"):
        load_profile(unknown)


def test_missing_file_names_the_fix(tmp_path):
    with pytest.raises(InputError, match="profile file not found.*profile=analytical"):
        load_profile(tmp_path / "nope.parquet")
