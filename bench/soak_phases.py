"""Where a soak's memory goes: the resident memory after each phase of one run, and the peak within it.

The soak's run (`bench/soak.py`: Poisson `smoke` traffic at `--rate` on `--instances` instances, `--requests` in
all) in this process, through the library calls `python -m sim` makes: compose, the workload, the engine
(`run_cluster`: the event loop, the request columns, the invariants), the summary and review, then the run folder.
After each phase it prints the resident set (VmRSS) and the peak within that phase (VmHWM, reset between phases
through /proc/self/clear_refs; on a kernel without it the peak is the run's so far). Differences between two
request counts give the bytes a request costs in each phase.

    python bench/soak_phases.py [--requests 1000000] [--instances 32] [--rate 128]
"""
from __future__ import annotations

import argparse
import tempfile
import time


def _status_mb() -> dict[str, float]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) / 1024.0
    return out


class Phases:
    """Prints one line per phase: resident MB after it, peak MB within it, seconds."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def done(self, name: str) -> None:
        m, t = _status_mb(), time.perf_counter()
        print(f"{name:<34} resident {m['VmRSS']:7.0f} MB · peak within {m['VmHWM']:7.0f} MB · {t - self.t0:6.1f} s",
              flush=True)
        self.t0 = t
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # (resets VmHWM to the current resident set)
        except OSError:
            pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--instances", type=int, default=32)
    ap.add_argument("--rate", type=float, default=128.0)
    args = ap.parse_args()
    phases = Phases()
    from sim.api import scenario_workload
    from sim.compose import compose_config
    from sim.config import load_run_config
    from sim.core.run import run_cluster
    from sim.results.result import SimResult
    from sim.results.summary import summarize
    from sim.results.write import write_run
    phases.done("imports")
    run = load_run_config(compose_config([
        "scenario=smoke", f"scenario.traffic.num_requests={args.requests}",
        f"scenario.traffic.rate_per_s={args.rate}", f"scenario.pools.main.instances={args.instances}",
        "metrics.progress=false"]))
    phases.done("compose")
    workload = scenario_workload(run)
    phases.done("workload")
    out = run_cluster(run, workload)
    phases.done("engine (loop, columns, invariants)")
    summary = summarize(run, out)
    phases.done("summary and review")
    with tempfile.TemporaryDirectory(prefix="soak_phases_") as tmp:
        write_run(SimResult(out.requests, out.timeseries_columns, out.pool_columns, summary), tmp)
        phases.done("run folder")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
