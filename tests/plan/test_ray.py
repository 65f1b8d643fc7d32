"""The Ray path: the planner's simulations as Ray tasks and `hydra/launcher=ray` sweeps, on a local Ray with 2 CPUs.

Ray is an optional extra (`pip install -e '.[ray]'`); without it these tests are skipped and the error a user gets
is checked instead.
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from sim.plan import parse_args, plan
from sim.plan.__main__ import main

from tests.plan.toy import CHOSEN, NEXT_CHEAPER, SEARCH, TOY

NO_RAY = "Ray is not installed: pip install -e '.[ray]' (CI installs the extra for these tests)"
requires_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason=NO_RAY)
requires_ray_launcher = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None or importlib.util.find_spec("hydra_plugins.hydra_ray_launcher") is None,
    reason=NO_RAY)


@requires_ray
@pytest.mark.slow  # starts a local Ray
def test_a_plan_on_a_local_ray_gives_the_same_answer(tmp_path):
    args = [*TOY, *SEARCH, f"out_dir={tmp_path / 'plan'}", f"cache_dir={tmp_path / 'cache'}", "ray_address=local",
            "jobs=2", "progress=false"]
    doc, path = plan(parse_args(args), "test")
    assert doc["jobs"]["backend"] == "ray" and doc["jobs"]["workers"] == 2
    assert doc["chosen"]["overrides"] == CHOSEN and doc["next_cheaper_failing"]["overrides"] == NEXT_CHEAPER
    # The workers shipped their run folders back: complete runs in the cache and the plan folder.
    for c in doc["configurations"]:
        job = path.parent / c["run_dir"]
        assert (job / "DONE").is_file() and (job / "requests.parquet").is_file()


@requires_ray_launcher
@pytest.mark.slow  # starts a local Ray
def test_a_sweep_on_the_ray_launcher_writes_sweep_parquet(tmp_path):
    sweep = tmp_path / "sweep"
    proc = subprocess.run([sys.executable, "-m", "sim", "-m", "hydra/launcher=ray",
                           "+hydra.launcher.ray.init.num_cpus=2", "scenario=smoke",
                           "scenario.traffic.num_requests=60", "batching=continuous,chunked_prefill",
                           f"hydra.sweep.dir={sweep}"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Ray Launcher is launching 2 jobs" in proc.stdout + proc.stderr
    df = pq.read_table(sweep / "sweep.parquet").to_pandas().sort_values("job")
    assert df["batching"].tolist() == ["continuous", "chunked_prefill"]
    assert df["status"].tolist() == ["completed", "completed"] and df["ttft_p99_s"].notna().all()


def test_without_ray_the_planner_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)        # `import ray` now raises ImportError
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["scenario=smoke", "ray_address=local"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err == ("error: command line: ray_address: Ray is not installed (fix: install the extra: "
                   "pip install -e '.[ray]' (or drop ray_address= to run in local processes))\n")
    assert not (tmp_path / "plans").exists()
