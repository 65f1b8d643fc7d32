"""Shipped trace data (`scenarios/data/`): `data:` and `shared:` path resolution, the shared-root variable, no
scenario depending on `shared:`, the reduced ServeGen pool loading as the full one, and rebuilds matching the
shipped bytes (the last two against full external copies, skipped when those are absent)."""
from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import yaml

from inferplan.errors import InputError
from scenarios.loaders import load_azure, load_mooncake, load_servegen_pool
from scenarios.paths import DATA_ROOT, REPO_ROOT, SHARED_ROOT_ENV, resolve_path, shared_root

SCENARIOS = sorted((REPO_ROOT / "conf" / "scenario").glob("*.yaml"))
DATA_BUDGET_BYTES = 10 * 1024 * 1024  # issue 18: at most 10 MB of data in the wheel
R1 = "servegen/reason/deepseek-r1"


def _strings(node):
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return [node] if isinstance(node, str) else []


# -- paths -------------------------------------------------------------------------------------------------------
def test_data_path_resolves_inside_the_package():
    path = resolve_path("data:traces/azure-llm-2023/AzureLLMInferenceTrace_conv.csv.gz")
    assert path == DATA_ROOT / "traces/azure-llm-2023/AzureLLMInferenceTrace_conv.csv.gz" and path.is_file()
    assert resolve_path("data:/traces/servegen/reason/deepseek-r1").is_dir()


def test_missing_data_path_names_the_place_tried():
    with pytest.raises(InputError, match=r"^traffic: path: 'data:traces/nope\.csv' does not exist \(tried "
                                         r".*scenarios/data/traces/nope\.csv\)"):
        resolve_path("data:traces/nope.csv")


def test_shared_root_follows_the_environment_variable(monkeypatch, tmp_path):
    monkeypatch.delenv(SHARED_ROOT_ENV, raising=False)
    assert shared_root() == REPO_ROOT.parent / "shared"
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "x.csv").write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00,5,3\n")
    monkeypatch.setenv(SHARED_ROOT_ENV, str(tmp_path))
    assert shared_root() == tmp_path
    assert resolve_path("shared:traces/x.csv") == tmp_path / "traces" / "x.csv"
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv(SHARED_ROOT_ENV, str(empty))
    with pytest.raises(InputError, match=rf"'shared:traces/x\.csv' does not exist \(tried {empty}/traces/x\.csv\)"):
        resolve_path("shared:traces/x.csv", file="scenario", field="traffic.path")
    monkeypatch.setenv(SHARED_ROOT_ENV, "")  # empty means unset
    assert shared_root() == REPO_ROOT.parent / "shared"


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenarios_name_only_shipped_data(path):
    strings = _strings(yaml.safe_load(path.read_text()))
    assert not [s for s in strings if s.startswith("shared:")]
    for s in strings:
        if s.startswith("data:"):
            assert resolve_path(s).exists()


def test_every_library_scenario_reading_a_trace_reads_shipped_data():
    named = {p.stem for p in SCENARIOS if any(s.startswith("data:") for s in _strings(yaml.safe_load(p.read_text())))}
    assert named == {"batch_offline", "chat_diurnal", "code_assistant", "deepseek_v3_day", "long_context_rag"}


# -- the shipped files ---------------------------------------------------------------------------------------------
def test_shipped_data_fits_the_budget_and_carries_licences():
    files = [p for p in DATA_ROOT.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert sum(p.stat().st_size for p in files) <= DATA_BUDGET_BYTES
    for source in ("azure-llm-2023", "mooncake", "servegen"):
        folder = DATA_ROOT / "traces" / source
        assert (folder / "LICENSE").is_file() and (folder / "README.md").is_file()
    assert "CC-BY 4.0" in (DATA_ROOT / "traces/azure-llm-2023/LICENSE").read_text()
    for source in ("mooncake", "servegen"):
        assert "Apache License" in (DATA_ROOT / "traces" / source / "LICENSE").read_text()


def test_shipped_servegen_pool_is_whole_and_gives_the_deepseek_v3_day_curve():
    pool = load_servegen_pool(DATA_ROOT / "traces" / R1)
    assert len(pool.windows.client_ids) == 73 and pool.windows.rate_per_s.shape == (73, 144)
    assert len(pool.prompt_pmfs) == 73 and pool.length_window_start_s.tolist() == [0.0, 21600.0, 43200.0, 64800.0]
    starts, rate = pool.aggregate_rate()
    noon = (starts >= 43200) & (starts < 43200 + 600)
    assert rate[noon].min() > 0  # deepseek_v3_day's default window (from 12:00) has traffic


def test_damaged_gzip_is_a_one_line_input_error(tmp_path):
    for name, load in (("t.csv.gz", load_azure), ("t.jsonl.gz", load_mooncake)):
        path = tmp_path / name
        path.write_bytes(gzip.compress(b'{"timestamp": 0, "input_length": 5}\n' * 50)[:40])  # cut short
        with pytest.raises(InputError, match=rf"^{path}: file: "):
            load(path)
    pool = tmp_path / "pool"
    pool.mkdir()
    (pool / "chunk-0-trace.csv.gz").write_bytes(b"\x1f\x8b\x08\x00 not gzip")
    with pytest.raises(InputError, match=r"chunk-0-trace\.csv\.gz: file: cannot be read"):
        load_servegen_pool(pool, with_lengths=False)


# -- against the full external copies ------------------------------------------------------------------------------
def _pmf_arrays(pmfs) -> list[np.ndarray]:
    return [a for pmf in pmfs for a in (pmf.values, pmf.cdf)]


@pytest.mark.shared_trace
def test_reduced_servegen_pool_loads_as_the_full_one(real_trace):
    full = load_servegen_pool(real_trace(R1))
    reduced = load_servegen_pool(DATA_ROOT / "traces" / R1)
    a, b = full.windows, reduced.windows
    assert a.client_ids == b.client_ids and a.window_s == b.window_s
    for name in ("window_start_s", "rate_per_s", "pattern", "shape"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert np.array_equal(full.length_window_start_s, reduced.length_window_start_s)
    assert full.length_window_s == reduced.length_window_s
    for side in ("prompt_pmfs", "output_pmfs"):
        fa, fb = getattr(full, side), getattr(reduced, side)
        assert len(fa) == len(fb)
        for ca, cb in zip(fa, fb):
            flat_a = _pmf_arrays(p for w in ca for p in (w if isinstance(w, tuple) else (w,)))
            flat_b = _pmf_arrays(p for w in cb for p in (w if isinstance(w, tuple) else (w,)))
            assert len(flat_a) == len(flat_b) and all(np.array_equal(x, y) for x, y in zip(flat_a, flat_b))


@pytest.mark.shared_trace
@pytest.mark.parametrize("relative", ["azure-llm-2023/AzureLLMInferenceTrace_code.csv",
                                      "azure-llm-2023/AzureLLMInferenceTrace_conv.csv",
                                      "mooncake/conversation_trace.jsonl"])
def test_shipped_azure_and_mooncake_are_lossless(real_trace, relative):
    shipped = DATA_ROOT / "traces" / f"{relative}.gz"
    assert gzip.decompress(shipped.read_bytes()) == real_trace(relative).read_bytes()


@pytest.mark.shared_trace
def test_rebuild_from_full_copies_gives_the_shipped_bytes(real_trace):
    traces = real_trace(R1).parents[2]
    spec = importlib.util.spec_from_file_location("make_data", DATA_ROOT / "make_data.py")
    make_data = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_data)
    built = make_data.build(traces)
    shipped = {p.relative_to(DATA_ROOT / "traces").as_posix(): p for p in (DATA_ROOT / "traces").rglob("*.gz")}
    assert sorted(built) == sorted(shipped)
    assert all(built[k] == Path(shipped[k]).read_bytes() for k in built)
