"""Where a measurement was taken: device, driver, library versions, CPU, threads, clocks, date and git commit.

Everything is read, never assumed; what cannot be read is recorded as "unknown". `device_identity` is the subset
that must match for two measurements to belong to one profile (a resumed run on another machine is refused).
"""
from __future__ import annotations

import datetime as dt
import os
import platform
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _run(cmd: list[str], cwd: Path | None = None) -> str:
    try:
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def git_commit() -> str:
    """HEAD of this checkout, with `+dirty` when tracked files differ; "unknown" outside git or before a commit."""
    if shutil.which("git") is None:
        return "unknown"
    head = _run(["git", "rev-parse", "HEAD"], REPO)
    if not head:
        return "unknown"
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no"], REPO)
    return head + ("+dirty" if dirty else "")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_clock_mhz() -> float | None:
    """Current clock of the first CPU as /proc/cpuinfo reports it (in a VM often the TSC rate)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("cpu MHz"):
                return float(line.split(":", 1)[1])
    except (OSError, ValueError):
        pass
    return None


def loadavg() -> float | None:
    """The 1-minute load average (runnable processes): above the core count, timings were contended."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def nvidia_smi() -> dict[str, str]:
    """Driver version and clocks of GPU 0 from nvidia-smi (empty when it is absent); one query per field, so a
    field this driver does not know costs only that field."""
    if shutil.which("nvidia-smi") is None:
        return {}
    info = {}
    for field in ("driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem", "power.limit",
                  "temperature.gpu"):
        out = _run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader", "--id=0"])
        if out:
            info[field] = out.splitlines()[0].strip()
    return info


def collect(device: str, threads: int) -> dict:
    """Provenance of measurements taken on `device` ("cpu" or "cuda") with `threads` CPU threads."""
    import numpy
    import torch

    info = {
        "date": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        "git_commit": git_commit(),
        "host": platform.node() or "unknown",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "cpu_model": cpu_model(),
        "cpu_logical_cores": os.cpu_count() or 0,
        "cpu_clock_mhz": cpu_clock_mhz(),
        "threads": threads,
        "backend": device,
        "loadavg_1m": loadavg(),
    }
    try:
        import triton
        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = "absent"
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        smi = nvidia_smi()
        info |= {"device": torch.cuda.get_device_name(0), "cuda": torch.version.cuda or "unknown",
                 "capability": f"{props.major}.{props.minor}", "sm_count": props.multi_processor_count,
                 "device_memory_bytes": props.total_memory, "driver": smi.get("driver_version", "unknown"),
                 "clocks": {k: v for k, v in smi.items() if k != "driver_version"}}
    else:
        info |= {"device": f"cpu: {info['cpu_model']} ({threads} threads)", "driver": "n/a",
                 "clocks": {"cpu_mhz": info["cpu_clock_mhz"]}}
    return info


def device_identity(info: dict) -> dict:
    """The fields two measurement sets must share to be pooled into one profile."""
    return {k: info.get(k) for k in ("device", "backend", "threads", "torch")}
