"""The `workers` Hydra launcher (`hydra_plugins/inferplan_launcher/`, `sim/sweep/launch.py`), the default of
`python -m sim -m`: Hydra lists it; its job folders and `sweep.parquet` hold the bytes the joblib launcher's hold
(Hydra's own files differ only where they name the launcher and the folder); a failing job is one line and the others
run; a SIGTERM keeps what finished, writes the running jobs' partial results and `sweep.parquet`, and ends the
workers."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import yaml

SMALL = ("scenario=smoke", "scenario.traffic.num_requests=60", "metrics.progress=false")


def sweep(tmp_path: Path, name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sim", "-m", *args, f"hydra.sweep.dir={tmp_path / name}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _hydra_yaml_sans_launcher(data: bytes) -> dict:
    cfg = yaml.safe_load(data)["hydra"]
    for key in ("launcher", "sweep"):
        cfg.pop(key)
    cfg["overrides"]["hydra"] = [o for o in cfg["overrides"]["hydra"] if not o.startswith("hydra")]
    cfg["runtime"].pop("output_dir", None)
    cfg["runtime"]["choices"].pop("hydra/launcher")
    return cfg


def test_hydra_lists_the_workers_launcher_and_multirun_uses_it_by_default():
    from hydra import compose, initialize_config_dir
    from hydra.core.plugins import Plugins
    from hydra.plugins.launcher import Launcher

    from inferplan.specs import CONF_DIR

    assert {"WorkersLauncher", "JoblibLauncher"} <= {c.__name__ for c in Plugins.instance().discover(Launcher)}
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        default = compose("config", return_hydra_config=True).hydra.launcher
        joblib = compose("config", ["hydra/launcher=joblib"], return_hydra_config=True).hydra.launcher
    assert default._target_ == "hydra_plugins.inferplan_launcher.workers_launcher.WorkersLauncher"
    assert default.workers is None                                                # every core
    assert joblib._target_.endswith("JoblibLauncher")                             # still selectable


def test_the_workers_launcher_writes_the_bytes_the_joblib_launcher_writes(tmp_path):
    grid = ("scenario.pools.main.instances=1,2", "router=round_robin,least_kv")
    ref = sweep(tmp_path, "joblib", *SMALL, *grid, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2")
    got = sweep(tmp_path, "workers", *SMALL, *grid, "hydra.launcher.workers=2")
    assert ref.returncode == got.returncode == 0, got.stderr
    assert "Workers(workers=2) is launching 4 jobs" in got.stdout + got.stderr
    a, b = _files(tmp_path / "joblib"), _files(tmp_path / "workers")
    assert sorted(a) == sorted(b) and len([n for n in a if n.endswith("/DONE")]) == 4
    for name in a:
        if name.endswith("summary.json"):                 # (it holds the wall time)
            x, y = json.loads(a[name]), json.loads(b[name])
            x.pop("wall_time_s"), y.pop("wall_time_s")
            assert x == y, name
        elif name == "sweep.parquet":
            x, y = (pq.read_table(tmp_path / d / name).drop(["wall_time_s"]) for d in ("joblib", "workers"))
            assert x.equals(y)
            assert x.column("router").to_pylist() == ["round_robin", "least_kv"] * 2
        elif name.endswith("hydra.yaml") or name == "multirun.yaml":   # Hydra's record of the launcher
            assert _hydra_yaml_sans_launcher(a[name]) == _hydra_yaml_sans_launcher(b[name]), name
        else:   # the run files, the job's config.yaml and overrides.yaml, its log
            assert a[name] == b[name], name
    assert yaml.safe_load(b["3/.hydra/hydra.yaml"])["hydra"]["job"]["num"] == 3
    assert yaml.safe_load(b["3/.hydra/overrides.yaml"])[-2:] == ["scenario.pools.main.instances=2", "router=least_kv"]


def test_a_failing_job_is_one_line_and_the_other_jobs_run(tmp_path):
    proc = sweep(tmp_path, "s", "scenario=smoke", "scenario.traffic.num_requests=40", "metrics.progress=false",
                 "scenario.pools.main.model=llama3_8b,llama3_70b,qwen2_5_7b", "hydra.launcher.workers=2")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "error: job 1: scenario/smoke: pools.main: tp: llama3_70b does not fit 1 x h100_sxm" in proc.stderr
    rows = pq.read_table(tmp_path / "s" / "sweep.parquet").to_pylist()
    assert [r["status"] for r in rows] == ["completed", "failed", "completed"]
    assert (tmp_path / "s" / "1" / "FAILED").read_text().strip() == rows[1]["error"]


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def test_sigterm_keeps_finished_jobs_writes_partial_results_and_ends_the_workers(tmp_path):
    out = tmp_path / "s"
    # A short first job beside long ones: when it is done, the other worker is mid-run (equal jobs could both end).
    proc = subprocess.Popen([sys.executable, "-m", "sim", "-m", "scenario=smoke", "metrics.progress=false",
                             "scenario.traffic.num_requests=2000,200000,200000,200000,200000,200000",
                             "hydra.launcher.workers=2", f"hydra.sweep.dir={out}"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    # Signal once one job is done and a second has started in the other worker (its folder exists): on a loaded
    # machine the other worker may still be importing when the short job ends.
    while not (list(out.glob("*/DONE")) and len(list(out.glob("[0-9]*/")) ) >= 2) and time.monotonic() < deadline \
            and proc.poll() is None:
        time.sleep(0.1)
    workers = _children(proc.pid)
    proc.send_signal(signal.SIGTERM)                                     # this process only, not its workers
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    assert stderr.splitlines()[-1] == f"interrupted: the jobs that ran (finished, or stopped with partial results) are in {out}"
    rows = pq.read_table(out / "sweep.parquet").to_pylist()
    statuses = [r["status"] for r in rows]
    assert "completed" in statuses and "interrupted" in statuses and set(statuses) <= {"completed", "interrupted"}
    assert len(rows) < 6                                                 # the jobs not started did not run
    for r in rows:                                                        # every folder whole, partial or not
        if (out / r["run_dir"] / "INTERRUPTED").exists():                 # the signal came before its simulation ran
            assert r["status"] == "interrupted" and r["error"] == "interrupted before the simulation ran"
            continue
        summary = json.loads((out / r["run_dir"] / "summary.json").read_text())
        assert summary["status"] == r["status"] and (out / r["run_dir"] / "requests.parquet").exists()
    deadline = time.monotonic() + 10        # (multiprocessing's resource tracker leaves once this process has)
    while [w for w in workers if Path(f"/proc/{w}").exists()] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(workers) >= 2 and not [w for w in workers if Path(f"/proc/{w}").exists()]
