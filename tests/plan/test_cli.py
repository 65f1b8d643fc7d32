"""`python -m sim.plan` end to end: the printed report, and one-line errors for bad input."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sim.plan.__main__ import main

from tests.plan.toy import SEARCH, TOY


def run_plan(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sim.plan", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_a_plan_prints_the_answer_and_writes_the_folder(tmp_path):
    proc = run_plan(*TOY, *SEARCH, "jobs=2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.splitlines()[0] == "PASS"
    assert "chosen: #" in out and "batching.max_num_seqs=2 scenario.pools.main.instances=3" in out
    assert "margin: default ttft_p99" in out
    assert "next cheaper, fails:" in out and "fails: default ttft_p99" in out
    assert "processes x2" in out
    plans = list((tmp_path / "plans" / "smoke").glob("*/plan.json"))     # the default out_dir
    assert len(plans) == 1 and json.loads(plans[0].read_text())["chosen"]["overrides"]["scenario.pools.main.instances"] == 3
    assert any((tmp_path / "plans" / ".cache").rglob("DONE"))            # the default cache
    assert proc.stderr == ""                                             # no progress bar without a terminal


def test_nothing_meeting_the_slos_exits_1(tmp_path):
    proc = run_plan(*TOY, "search.scenario.pools.main.instances=[1,2]", "batching.max_num_seqs=1", "jobs=1",
                    "check=true", f"out_dir={tmp_path / 'p'}", f"deploy={tmp_path / 'd'}", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    # the verdict first: what the cheapest configuration (one instance, m = 1: P99 TTFT ~ 17 s) misses
    assert proc.stdout.startswith("FAIL: no configuration meets every SLO; the cheapest, #"), proc.stdout[:300]
    assert "misses ttft_p99 default " in proc.stdout.splitlines()[0]
    assert "no configuration in the search meets the SLOs" in proc.stdout
    assert "deploy: nothing written" in proc.stderr and not (tmp_path / "d").exists()
    assert json.loads((tmp_path / "p" / "plan.json").read_text())["chosen"] is None


@pytest.mark.parametrize("args, expected", [
    (["search.batching=[continuous,nope]"], "unknown batching 'nope' (fix: use one of:"),
    (["search.scenario.pools.nope.instances=[1,2]"], "not in the composed config"),
    (["search.scenario.pools.main.instances=interval(1,4)"], "interval() is continuous"),
    (["objective=beauty"], "unknown objective 'beauty' (fix: use one of: usd,"),
    (["jobs=0"], "jobs: must be >= 1"),
    (["hydra.run.dir=x"], "Hydra's own settings do not apply to the planner"),
    (["scenario=nope"], "unknown scenario 'nope'"),
    (["scenario"], "is not key=value"),
])
def test_bad_input_gives_one_line_and_exit_2(tmp_path, monkeypatch, capsys, args, expected):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(args)
    assert exit_.value.code == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], lines
    assert not (tmp_path / "plans").exists()                             # nothing ran


def test_bad_input_exits_2_from_the_command_line(tmp_path):
    proc = run_plan("scenario=smoke", "search.router=[round_robin,nope]", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: conf/router: router: unknown router 'nope'") and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_help_lists_the_options(tmp_path):
    proc = run_plan("--help", cwd=tmp_path)
    assert proc.returncode == 0 and "ray_address=" in proc.stdout and "search." in proc.stdout


@pytest.mark.parametrize("signum, code", [(2, 130), (15, 143)])
def test_an_interrupted_plan_writes_what_finished_and_exits_with_the_signal_code(tmp_path, signum, code):
    import signal
    import time

    out, cache = tmp_path / "plan", tmp_path / "cache"
    proc = subprocess.Popen([sys.executable, "-m", "sim.plan", "scenario=smoke", "scenario.traffic.num_requests=20000",
                             "search.scenario.pools.main.instances=range(1,13)", "jobs=1", f"out_dir={out}",
                             f"cache_dir={cache}"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 240
    while not any(cache.rglob("DONE")) and time.monotonic() < deadline:   # a first configuration finished
        time.sleep(0.05)
    proc.send_signal(signal.Signals(signum))
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == code, stderr
    lines = [line for line in stderr.splitlines() if line.strip() and "StaleBuildWarning" not in line]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith("interrupted after ") and f"partial plan in {out / 'plan.json'}" in lines[0]
    doc = json.loads((out / "plan.json").read_text())
    assert doc["status"] == "interrupted" and doc["configurations"]
    assert all(c["status"] == "completed" and c["usd"] is not None for c in doc["configurations"])
    assert doc["notes"][0].startswith(f"interrupted ({signal.Signals(signum).name})")
