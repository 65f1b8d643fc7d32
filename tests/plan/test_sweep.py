"""`python -m sim -m ...` (the `workers` launcher, long-lived local processes) writes `sweep.parquet`: one row per job, its overrides
and the metrics the dashboard's Compare page reads; `python -m sim.sweep` rebuilds it after a failed job."""
from __future__ import annotations

import json
import subprocess
import sys

import pyarrow.parquet as pq

from sim.sweep import flatten_summary

SMALL = ("scenario=smoke", "scenario.traffic.num_requests=60")


def run(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_a_multirun_writes_sweep_parquet(tmp_path):
    proc = run("-m", "sim", "-m", *SMALL, "batching=continuous,chunked_prefill", "hydra.launcher.workers=2",
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Workers(workers=2) is launching 2 jobs" in proc.stdout + proc.stderr   # worker processes, not the basic launcher
    (sweep,) = (tmp_path / "multirun" / "smoke").iterdir()                  # the default multirun/<scenario>/<time>
    assert f"sweep: {sweep.relative_to(tmp_path) / 'sweep.parquet'} (2 jobs, 2 completed)" in proc.stdout
    lines = proc.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "sweep · 2 jobs · cheapest first" in line)
    table = lines[start:next(i for i, line in enumerate(lines) if line.startswith("sweep: "))]
    assert len(table) >= 6 and max(len(line) for line in table) <= 80 and "…" not in "".join(table)
    assert any("continuous" in line and "met" in line for line in table)
    table = pq.read_table(sweep / "sweep.parquet")
    df = table.to_pandas().sort_values("job")
    assert df["job"].tolist() == [0, 1] and df["run_dir"].tolist() == ["0", "1"]
    assert df["batching"].tolist() == ["continuous", "chunked_prefill"]
    assert df["scenario.traffic.num_requests"].tolist() == [60, 60]
    assert str(table.schema.field("scenario.traffic.num_requests").type) == "int64"
    assert df["status"].tolist() == ["completed", "completed"] and df["requests_arrived"].tolist() == [60, 60]
    for _, row in df.iterrows():
        summary = json.loads((sweep / row["run_dir"] / "summary.json").read_text())
        assert row["ttft_p99_s"] == summary["latency_s"]["ttft"]["p99"]
        assert row["usd"] == summary["cost"]["usd"] and bool(row["slo_met"]) == all(summary["slo"]["met"].values())

    from dashboard.compare import METRICS, sweep_frame
    metrics = set(flatten_summary(summary)) - {"scenario", "seed"}
    assert {m for m in metrics if not m.startswith("slo_met_")} <= METRICS     # no metric taken for an override
    frame, notes = sweep_frame(sweep)
    assert notes == [] and frame["label"].str.startswith("batching=").all()


def test_a_failed_job_keeps_partial_results_and_the_table_can_be_rebuilt(tmp_path):
    sweep = tmp_path / "sweep"
    proc = run("-m", "sim", "-m", *SMALL, "scenario.pools.main.model=llama3_8b,deepseek_v3",
               "hydra.launcher.workers=1", f"hydra.sweep.dir={sweep}", cwd=tmp_path)
    assert proc.returncode == 1 and "error: job 1: " in proc.stderr and "does not fit" in proc.stderr
    assert "Traceback" not in proc.stderr
    written = pq.read_table(sweep / "sweep.parquet").to_pandas()     # written although a job failed
    (sweep / "sweep.parquet").unlink()
    rebuilt = run("-m", "sim.sweep", str(sweep), cwd=tmp_path)
    assert rebuilt.returncode == 0 and "(2 jobs, 1 completed)" in rebuilt.stdout
    df = pq.read_table(sweep / "sweep.parquet").to_pandas().sort_values("job")
    assert df.drop(columns="wall_time_s").equals(written.sort_values("job").drop(columns="wall_time_s"))
    assert df["status"].tolist() == ["completed", "failed"]
    assert df["scenario.pools.main.model"].tolist() == ["llama3_8b", "deepseek_v3"]
    assert df["ttft_p99_s"].notna().tolist() == [True, False]
    assert "does not fit" in df["error"].iloc[1] and df["error"].iloc[0] == ""


def test_rebuilding_an_empty_folder_is_one_line(tmp_path):
    proc = run("-m", "sim.sweep", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "holds no job folders" in proc.stderr


def test_a_typo_in_a_swept_groups_first_value_is_one_line_before_any_job(tmp_path):
    proc = run("-m", "sim", "-m", *SMALL, "batching=nope,continuous", f"hydra.sweep.dir={tmp_path / 's'}",
               cwd=tmp_path)
    assert proc.returncode == 2 and not (tmp_path / "s").exists()
    assert proc.stderr == ("error: conf/batching: batching: unknown batching 'nope' (fix: use one of: chunked_prefill, "
                           "continuous, dynamic, static)\n")


def test_a_job_stopped_before_its_simulation_ran_is_interrupted_not_failed(tmp_path):
    """A signal during a job's composition leaves its folder with `.hydra/` and the INTERRUPTED marker only."""
    from sim.sweep.table import rows_from_folder

    for job, marker in ((0, "INTERRUPTED"), (1, None)):
        hydra = tmp_path / str(job) / ".hydra"
        hydra.mkdir(parents=True)
        (hydra / "overrides.yaml").write_text(f"- seed={job}\n")
        if marker:
            (tmp_path / str(job) / marker).write_text("SIGTERM before the simulation ran\n")
    rows = rows_from_folder(tmp_path)
    assert [(r["status"], r["error"]) for r in rows] == [
        ("interrupted", "interrupted before the simulation ran"),
        ("failed", "no results (the job did not finish)")]


def test_a_job_stopped_before_hydra_set_it_up_is_listed_with_its_overrides(tmp_path):
    """A signal before Hydra wrote the job's `.hydra/` files: the marker alone (written by the launcher with the
    job's overrides) puts the job in the table, `interrupted`, with the value it would have run."""
    import signal

    from sim.results.write import mark_interrupted
    from sim.sweep.table import rows_from_folder

    (tmp_path / "0" / ".hydra").mkdir(parents=True)
    (tmp_path / "0" / ".hydra" / "overrides.yaml").write_text("- seed=0\n")
    mark_interrupted(tmp_path / "1", signal.SIGTERM, ["seed=1"])
    rows = rows_from_folder(tmp_path)
    assert [(r["job"], r["status"], r["seed"]) for r in rows] == [(0, "failed", 0), (1, "interrupted", 1)]
    assert rows[1]["error"] == "interrupted before the simulation ran"
