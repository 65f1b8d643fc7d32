"""Nothing computed is lost: SIGINT/SIGTERM stop a run at an event boundary and its partial results are written;
a failing sweep job does not stop the others; a pool that can never serve is a config error; no data is no pass."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow.parquet as pq
import pytest

from inferplan.errors import InputError
from scenarios.workload import Workload
from sim.report import print_summary
from sim.simulate import simulate
from tests.sim.helpers import poisson_workload, run_config

SYNTH = ["cost=constant", "cost.step_time_s=0.01", "cost.per_token_s=0", "scenario.frontend_overhead_s=0"]


def _signal_at(fraction: float, signum: int):
    """A progress callback that sends `signum` to this process once the run has passed `fraction` of its time."""
    sent = []

    def progress(f: float) -> None:
        if f >= fraction and not sent and f < 1.0:
            sent.append(f)
            os.kill(os.getpid(), signum)
    return progress


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_run_at_an_event_boundary_with_every_arrived_request_kept(signum):
    run = run_config(*SYNTH, "scenario.pools.main.instances=1")
    wl = poisson_workload(4000, 50.0, seed=1)
    res = simulate(run, wl, _signal_at(0.3, signum))
    s = res.summary
    assert res.interrupted_by == signum and s["status"] == "interrupted"
    arrived = s["requests"]["arrived"]
    assert 0 < arrived < len(wl)                       # stopped early, after some work
    assert len(res.requests["status"]) == arrived       # one row per arrived request
    assert s["requests"]["completed"] + s["requests"]["unfinished"] + s["requests"]["rejected"] == arrived
    assert s["requests"]["unfinished"] > 0              # those in flight are kept, marked unfinished
    assert all(v == "ok" for v in s["invariants"].values()), s["invariants"]
    # The stop is at the simulated time the signal came: about 30% of the arrivals' span.
    assert s["simulated_duration_s"] == pytest.approx(0.3 * float(wl.arrival_s[-1]), rel=0.05)


def test_a_finished_run_says_completed():
    res = simulate(run_config(*SYNTH), poisson_workload(50, 10.0, seed=2))
    assert res.interrupted_by == 0 and res.summary["status"] == "completed"


def _start_and_signal(tmp_path, signum: int, delay_s: float) -> tuple[subprocess.CompletedProcess, object]:
    out = tmp_path / f"run{signum}-{delay_s}"
    proc = subprocess.Popen([sys.executable, "-m", "sim", "scenario=smoke", "scenario.traffic.num_requests=2000000",
                             "scenario.traffic.rate_per_s=2000", "scenario.pools.main.instances=64", *SYNTH,
                             f"hydra.run.dir={out}"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 120
    while not (out / ".hydra" / "config.yaml").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(delay_s)
    sent = time.monotonic()
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), (out, time.monotonic() - sent)


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_cli_interrupt_writes_partial_results_and_exits_with_the_signal_code(tmp_path, signum, code):
    for delay_s in (4.0, 10.0):   # (a loaded machine may still be building the workload after the first delay)
        proc, (out, took_s) = _start_and_signal(tmp_path, signum, delay_s)
        lines = [line for line in proc.stderr.splitlines() if line.strip() and "StaleBuildWarning" not in line]
        assert proc.returncode == code, proc.stderr
        assert "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr
        if lines[0].startswith("interrupted at simulated t = "):
            break
        assert lines[0].startswith("interrupted before the simulation ran"), lines
    else:
        pytest.fail("the signal never arrived during the simulation")
    assert lines[0].endswith(f"partial results in {out}")
    assert took_s < 30
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "interrupted" and (out / "DONE").exists()
    req = pq.read_table(out / "requests.parquet")
    assert req.num_rows == summary["requests"]["arrived"] > 0
    assert set(req.column("status").to_pylist()) <= {"completed", "unfinished", "rejected"}


def test_a_failing_sweep_job_does_not_stop_the_others(tmp_path):
    sweep = tmp_path / "sweep"
    proc = subprocess.run([sys.executable, "-m", "sim", "-m", "scenario=smoke", "scenario.traffic.num_requests=40",
                           "scenario.pools.main.model=llama3_8b,llama3_70b,qwen2_5_7b", "hydra.launcher.workers=1",
                           f"hydra.sweep.dir={sweep}"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr
    rows = pq.read_table(sweep / "sweep.parquet").to_pylist()
    assert [r["status"] for r in rows] == ["completed", "failed", "completed"]   # job 2 ran after job 1 failed
    assert rows[1]["scenario.pools.main.model"] == "llama3_70b" and "does not fit 1 x h100_sxm" in rows[1]["error"]
    assert "\n" not in rows[1]["error"] and rows[0]["error"] == rows[2]["error"] == ""
    assert (sweep / "1" / "FAILED").read_text().strip() == rows[1]["error"]
    assert json.loads((sweep / "0" / "summary.json").read_text())["requests"]["completed"] == 40
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("overrides, field, text", [
    (["scenario.pools.main.instances=0"], "pools.main.instances", "never serve: instances is 0 and its autoscaler is `fixed`"),
    (["autoscaler=reactive", "scenario.pools.main.instances=0", "+scenario.pools.main.max_instances=0"], "pools.main.instances", "max_instances is 0"),
    (["autoscaler=reactive", "+scenario.pools.main.min_instances=3", "+scenario.pools.main.max_instances=2"],
     "pools.main.min_instances", "got 3 and 2"),
])
def test_a_pool_that_can_never_serve_is_a_config_error(overrides, field, text):
    with pytest.raises(InputError) as err:
        run_config(*overrides)
    assert err.value.field == field and text in err.value.problem


def test_an_empty_pool_with_an_autoscaler_is_valid():
    run_config("scenario.pools.main.instances=0", "autoscaler=reactive")


def test_a_decode_pool_is_not_checked_against_prompt_scheduling():
    # The decode pool's token budget (2,048) is below the model's context (8,192): it never schedules a prompt.
    run = run_config(*SYNTH, "+scenario.pools.main.role=prefill", "+scenario.pools.main.decode_pool=dec",
                     "+scenario.pools.dec={hardware: h100_sxm, model: llama3_8b, role: decode, "
                     "batching: {token_budget: 2048}}")
    res = simulate(run, poisson_workload(30, 5.0, seed=3))
    assert res.summary["requests"]["completed"] == 30
    assert res.summary["pools"]["dec"]["requests_completed"] == 30


def test_an_slo_with_no_data_reads_no_data_never_met(capsys):
    # Every request is longer than the model's context: all rejected, no latency measured.
    res = simulate(run_config(*SYNTH), Workload.from_columns(np.array([0.0, 1.0]), np.array([10**6, 10**6]),
                                                            np.array([5, 5])))
    slo = res.summary["slo"]
    assert slo["met"]["ttft_p99"] is None and slo["met"]["tpot_p99"] is None
    assert slo["met"]["served_fraction"] is False
    for c in slo["classes"].values():
        assert c["met"]["ttft_p99"] is None and c["met"]["tpot_p99"] is None
    from sim.plan.slo import meets_slos
    assert not meets_slos(res.summary)
    print_summary(res.summary, "x")
    table = capsys.readouterr().out
    ttft_row = next(line for line in table.splitlines() if "ttft_ms" in line)
    assert "no data" in ttft_row and "✓" not in ttft_row


def test_an_error_that_masks_an_interrupt_is_raised_as_the_interrupt():
    """Library code whose cleanup fails when our interrupt arrives mid-call (Hydra's config reader closes a file it
    never opened: UnboundLocalError) must not turn Ctrl-C into a traceback; other errors pass unchanged."""
    import signal as _signal

    from inferplan.interrupts import Interrupted, unmasked_interrupts

    def library_call():
        try:
            raise Interrupted(_signal.SIGTERM)   # the signal handler fires inside the library
        finally:
            raise UnboundLocalError("cannot access local variable 'f'")

    with pytest.raises(Interrupted) as caught:
        with unmasked_interrupts():
            library_call()
    assert caught.value.signum == _signal.SIGTERM and caught.value.exit_code == 143
    with pytest.raises(ValueError, match="plain"):
        with unmasked_interrupts():
            raise ValueError("plain")
