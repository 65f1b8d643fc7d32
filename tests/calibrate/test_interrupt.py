"""`python -m calibrate` is visible, bounded and interruptible: progress on stderr from the start, `budget_s`
bounding the whole run (peaks included), and SIGINT/SIGTERM keeping what was measured (exit 130/143, one line,
out within 2 s)."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from calibrate.measurements import read_measurements
from calibrate.run import run_calibration

REPO = Path(__file__).resolve().parents[2]
TINY = ["hardware=cpu_local", "grid=tiny", "threads=1", "dtypes=[bf16]"]


def start(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, Path]:
    err = tmp_path / "stderr.txt"
    proc = subprocess.Popen([sys.executable, "-m", "calibrate", *TINY, f"out_dir={tmp_path / 'cal'}", *args],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=err.open("w"), text=True)
    return proc, err


def wait_for(err: Path, pattern: str, proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if re.search(pattern, err.read_text()):
            return
        assert proc.poll() is None, f"exited {proc.returncode} before {pattern!r}: {err.read_text()}"
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"no {pattern!r} on stderr within {timeout_s} s: {err.read_text()}")


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_keeps_the_measurements_and_exits_promptly(tmp_path, signum, code):
    proc, err = start(tmp_path, "budget_s=60", "peaks=measured")
    wait_for(err, r"sweep: \d+ points", proc)
    time.sleep(0.25)  # a few tiny-grid points are timed by now (a quiet machine times all 17 in ~0.5 s)
    proc.send_signal(signum)
    sent = time.monotonic()
    proc.wait(timeout=10)
    took_s = time.monotonic() - sent
    text = err.read_text()
    assert proc.returncode == code, text
    assert took_s < 2.0, f"{took_s:.2f} s after the signal"
    assert "Traceback" not in text
    last = text.strip().splitlines()[-1]
    match = re.fullmatch(rf"interrupted \({signal.Signals(signum).name}\): (\d+) measurements kept in (\S+); "
                         r"re-run the same command to resume", last)
    assert match, last
    folder = Path(match.group(2))
    assert folder == tmp_path / "cal" and folder.is_dir()
    assert not list(folder.glob("*.tmp"))
    rows, meta = read_measurements(folder / "measurements.parquet")
    assert len(rows) == int(match.group(1)) > 0
    assert meta["peaks"]["measured"]["not_measured"] == []  # the peaks, measured before the sweep, are kept


def test_the_next_run_resumes_after_a_signal(tmp_path):
    proc, err = start(tmp_path, "budget_s=60", "peaks=measured", "ops=[gemm,elementwise]")
    wait_for(err, r"sweep: \d+ points", proc)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=10) == 130
    kept = len(read_measurements(tmp_path / "cal" / "measurements.parquet")[0])
    done = subprocess.run([sys.executable, "-m", "calibrate", *TINY, f"out_dir={tmp_path / 'cal'}", "budget_s=60",
                           "peaks=measured", "ops=[gemm,elementwise]", "progress=false"], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    sweep = json.loads((tmp_path / "cal" / "fit.json").read_text())["sweep"]
    assert sweep["reused"] == kept and sweep["remaining"] == 0


def test_progress_starts_at_once_and_covers_the_peaks(tmp_path):
    proc, err = start(tmp_path, "budget_s=20", "peaks=measured", "ops=[elementwise]")
    assert proc.wait(timeout=120) == 0, err.read_text()
    lines = err.read_text().splitlines()
    stamps = [float(re.match(r"\[\s*([\d.]+) s\]", ln).group(1)) for ln in lines]
    assert stamps[0] < 2.0 and "loading torch" in lines[0]  # before torch is imported
    peak_start = next(i for i, ln in enumerate(lines) if re.search(r"peaks: \d+ ceilings", ln))
    peak_end = next(i for i, ln in enumerate(lines) if "peaks: done" in ln)
    assert peak_start < peak_end and "budget left" in lines[peak_start]
    assert any("sweep: done" in ln for ln in lines) and any("fit: done" in ln for ln in lines)


def test_budget_bounds_the_whole_run_peaks_included(make_settings):
    started = time.monotonic()
    result = run_calibration(make_settings(peaks="measured", budget_s=1.0, grid="cpu", ops=("gemm",)),
                             started_s=started)
    took_s = time.monotonic() - started
    # NOTE: 1 s of budget; one launch past a deadline and the fit of what was kept are the overshoot allowed.
    assert took_s < 2.0, took_s
    fit = json.loads(result.fit_path.read_text())
    assert fit["sweep"]["stopped_by_budget"] and fit["sweep"]["remaining"] > 0
    assert fit["config"]["budget_s"] == 1.0


def test_a_tiny_budget_on_the_command_line_ends_quickly_and_says_so(tmp_path):
    proc, err = start(tmp_path, "budget_s=1", "peaks=measured", "grid=cpu")
    sent = time.monotonic()
    assert proc.wait(timeout=60) == 0, err.read_text()
    text = err.read_text()
    assert "peak share of the budget reached" in text or "budget reached" in text, text
    assert time.monotonic() - sent < 30  # torch import and start-up dominate; no measurement runs on
