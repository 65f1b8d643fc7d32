"""Soak: millions of requests through one `python -m sim` run, with the process's peak memory.

Poisson chat traffic (the `smoke` scenario's lengths) at `--rate` requests/s on `--instances` Llama-3-8B H100s
(about the smoke scenario's load per instance), `--requests` in all (default 10,000,000), run as the user runs it
(a fresh process that composes, generates the workload, simulates and writes its run folder). It prints the
requests, the wall and loop seconds, and the child's peak resident memory (`wait4` rusage), against the 1 GB
bound. A shorter soak (`--requests 1000000`) also prints the 10 M figures extrapolated linearly from it (stated as
such: memory per request and seconds per request times 10 M; the fixed part, the interpreter and libraries, is
measured with a `--base` run, 1,000 requests by default, and not scaled). Parts that grow to a cap (the cost
model's shape caches, the Parquet writer's buffers) make a 1,000-request base overstate the slope: `--base`
at half of `--requests` measures the marginal cost of a request instead.

    python bench/soak.py [--requests 10000000] [--base 1000] [--instances 32] [--rate 128] [--keep DIR]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sim.results.read import read_summary

REPO = Path(__file__).resolve().parent.parent
FULL = 10_000_000
BOUND_MB = 1024.0


def run(requests: int, instances: int, rate: float, out_dir: Path) -> dict:
    cmd = [sys.executable, "-m", "sim", "scenario=smoke", f"scenario.traffic.num_requests={requests}",
           f"scenario.traffic.rate_per_s={rate}", f"scenario.pools.main.instances={instances}",
           "metrics.progress=false", f"hydra.run.dir={out_dir}"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = proc.stderr.read() if proc.stderr else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall_s = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"python -m sim failed: {(err.strip().splitlines() or ['?'])[-1]}")
    s = read_summary(out_dir)
    return {"requests": s["requests"]["arrived"], "completed": s["requests"]["completed"], "wall_s": wall_s,
            "loop_s": float(s["wall_time_s"]), "peak_mb": usage.ru_maxrss / 1024.0}


def show(label: str, r: dict) -> None:
    print(f"{label}: {r['requests']:,} requests ({r['completed']:,} completed) · whole process {r['wall_s']:.1f} s · "
          f"loop {r['loop_s']:.1f} s · peak RSS {r['peak_mb']:.0f} MB", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=FULL)
    ap.add_argument("--base", type=int, default=1000, help="requests of the run the extrapolation starts from")
    ap.add_argument("--instances", type=int, default=32)
    ap.add_argument("--rate", type=float, default=128.0, help="arrivals per second (smoke: 8 on 2 instances)")
    ap.add_argument("--keep", default=None, help="write the run folders under this directory")
    args = ap.parse_args()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="soak_") as tmp:
        root = Path(args.keep) if args.keep else Path(tmp)
        r = run(args.requests, args.instances, args.rate, root / "soak")
        show("soak", r)
        if args.requests < FULL:
            base = run(args.base, args.instances, args.rate, root / "base")
            show(f"base ({args.base:,} requests)", base)
            per_mb = (r["peak_mb"] - base["peak_mb"]) / (r["requests"] - base["requests"])
            per_s = (r["wall_s"] - base["wall_s"]) / (r["requests"] - base["requests"])
            mb = base["peak_mb"] + per_mb * (FULL - base["requests"])
            wall = base["wall_s"] + per_s * (FULL - base["requests"])
            print(f"10 M requests, extrapolated linearly: peak RSS ~{mb:.0f} MB ({per_mb * 1e3:.3f} kB a "
                  f"request), whole process ~{wall / 60:.0f} min")
            peak = mb
        else:
            peak = r["peak_mb"]
    print(f"soak: peak {peak:.0f} MB, {'within' if peak <= BOUND_MB else 'over'} {BOUND_MB:.0f} MB"
          + ("" if args.requests >= FULL else " (extrapolated)"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
