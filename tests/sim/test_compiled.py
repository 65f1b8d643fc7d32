"""The compiled build (mypyc, setup.py): the same output bytes as the interpreted sources, and a guard that never
lets a compiled module older than its source run."""
from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import sim
from sim import compiled

ROOT = Path(__file__).resolve().parents[2]

# Every batching policy and router, with prefix caching (a second tier and preemptions in one case), written as
# result files.
SCRIPT = r"""
import sys
from pathlib import Path
import numpy as np
import sim
from scenarios.workload import Workload
from sim.compose import compose_config
from sim.config import load_run_config
from sim.results.write import write_run
from sim.simulate import simulate

rng = np.random.default_rng(5)
n = 400
arrival = np.cumsum(rng.exponential(1 / 30.0, n))
prompt = np.clip(np.round(rng.lognormal(np.log(600), 0.9, n)), 1, 6000)
output = np.clip(np.round(rng.lognormal(np.log(80), 0.7, n)), 1, 900)
hashes = [np.arange(k % 7, k % 7 + int(p) // 512, dtype=np.uint64) for k, p in enumerate(prompt)]
wl = Workload.from_columns(arrival, prompt, output, prefix_hashes=hashes, hash_block_tokens=512)
out = Path(sys.argv[1])
small_kv = ["++scenario.pools.main.num_gpu_blocks_override=700", "++scenario.pools.main.kv_tier2_bytes=4e9"]
for batching, router, extra in [("continuous", "least_outstanding", []), ("chunked_prefill", "prefix_affinity", []),
                                ("static", "round_robin", []), ("dynamic", "length_aware", []),
                                ("continuous", "least_kv", small_kv)]:
    run = load_run_config(compose_config(["scenario=smoke", "metrics.progress=false", f"batching={batching}",
                                          f"router={router}", "scenario.pools.main.instances=3",
                                          "++scenario.pools.main.prefix_caching=true", *extra]))
    res = simulate(run, wl)
    assert res.summary["requests"]["completed"] > 0
    write_run(res, out / f"{batching}-{router}")
print(sim.BUILD)
"""


def _run(out: Path, pure: bool) -> str:
    env = {k: v for k, v in os.environ.items() if k != compiled.PURE_ENV}
    if pure:
        env[compiled.PURE_ENV] = "1"
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(out)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip().splitlines()[-1]


# CI installs as the README says, on a machine with a C compiler: there the build must be compiled (the test then
# fails rather than skips); elsewhere an interpreted install skips it.
@pytest.mark.skipif(sim.BUILD != "compiled" and not os.environ.get("CI"),
                    reason=f"the simulator is not compiled here: {sim.BUILD}")
def test_compiled_and_interpreted_runs_write_identical_bytes(tmp_path):
    assert _run(tmp_path / "c", pure=False) == "compiled"
    assert _run(tmp_path / "p", pure=True) == f"interpreted ({compiled.PURE_ENV} is set)"
    files = sorted(p.relative_to(tmp_path / "c") for p in (tmp_path / "c").rglob("*.parquet"))
    assert len(files) == 15
    for rel in files:
        assert (tmp_path / "c" / rel).read_bytes() == (tmp_path / "p" / rel).read_bytes(), rel


def _tree(tmp_path: Path, source: str = "X = 1\n") -> tuple[Path, Path]:
    """A package `pkg` with module `pkg.mod` and a manifest recording its source, plus a fake extension."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text(source)
    (pkg / f"mod{compiled.importlib.machinery.EXTENSION_SUFFIXES[0]}").write_bytes(b"not a real extension")
    manifest = pkg / "_compiled.json"
    compiled.write_manifest(["pkg/mod.py"], tmp_path, manifest)
    return pkg, manifest


def test_guard_reports_compiled_when_sources_match(tmp_path, monkeypatch):
    monkeypatch.delenv(compiled.PURE_ENV, raising=False)
    _, manifest = _tree(tmp_path)
    before = list(sys.meta_path)
    assert compiled.install_guard(manifest) == "compiled"
    assert sys.meta_path == before


def test_guard_runs_sources_when_one_was_edited(tmp_path, monkeypatch):
    monkeypatch.delenv(compiled.PURE_ENV, raising=False)
    pkg, manifest = _tree(tmp_path)
    (pkg / "mod.py").write_text("X = 2\n")  # edited since "compiled"
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.syspath_prepend(str(tmp_path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        status = compiled.install_guard(manifest)
    assert status == "interpreted (1 compiled module(s) older than their source)"
    assert [w.category for w in caught] == [compiled.StaleBuildWarning]
    assert "pkg/mod.py changed since it was compiled" in str(caught[0].message)
    # The bogus extension beside it would fail to load: the source is what imports.
    monkeypatch.delitem(sys.modules, "pkg", raising=False)
    monkeypatch.delitem(sys.modules, "pkg.mod", raising=False)
    import pkg.mod  # type: ignore[import-not-found]
    assert pkg.mod.X == 2 and pkg.mod.__file__.endswith("mod.py")


def test_guard_obeys_pure_python_env_and_ignores_missing_extensions(tmp_path, monkeypatch):
    pkg, manifest = _tree(tmp_path)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.setenv(compiled.PURE_ENV, "1")
    assert compiled.install_guard(manifest) == f"interpreted ({compiled.PURE_ENV} is set)"
    assert isinstance(sys.meta_path[0], compiled.SourceFirst)
    monkeypatch.delenv(compiled.PURE_ENV)
    for ext in pkg.glob("mod.*"):
        if ext.suffix != ".py":
            ext.unlink()
    assert compiled.install_guard(manifest) == "interpreted (not compiled)"  # a build without a C compiler
    assert compiled.install_guard(tmp_path / "missing.json") == "interpreted (not compiled)"
