"""Simulator speed: simulated requests and SimPy events per wall-second, and peak memory.

Workload: the Azure LLM 2023 conversation trace (shared/traces/azure-llm-2023), superposed `--rate-factor`
times (circularly shifted copies, `scale_rate`) so that 8 Llama-3-8B instances on H100 (continuous batching,
analytical cost model) run near 70% busy. Prints one table; the ratio to the peer figure (Vidur 0.0.26: 400-460
simulated requests per wall-second, measured on this machine kind on a comparable 40,000-request, 4-replica
workload) is computed from this run's measurement.

    python bench/sim_speed.py [--rate-factor 3] [--instances 8] [--profile out.html]
"""
from __future__ import annotations

import argparse
import time
import tracemalloc

from scenarios import build_workload
from sim.compose import compose_config
from sim.config import load_run_config
from sim.run import simulate

PEER_REQ_PER_S = 430.0  # midpoint of Vidur 0.0.26's 400-460 requests per wall-second on this machine kind


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate-factor", type=float, default=3.0)
    ap.add_argument("--instances", type=int, default=8)
    ap.add_argument("--profile", default=None, help="write a pyinstrument HTML profile here")
    ap.add_argument("--no-memory", action="store_true", help="skip tracemalloc (it slows Python down)")
    args = ap.parse_args()
    traffic = {"kind": "trace", "format": "azure", "path": "shared:traces/azure-llm-2023/AzureLLMInferenceTrace_conv.csv",
               "transforms": [{"kind": "scale_rate", "factor": args.rate_factor}]}
    wl = build_workload(traffic, seed=0)
    run = load_run_config(compose_config(["scenario=smoke", f"scenario.pools.main.instances={args.instances}",
                                          "metrics.progress=false", "scenario.frontend_overhead_s=0"]))
    profiler = None
    if args.profile:
        from pyinstrument import Profiler
        profiler = Profiler()
        profiler.start()
    if not args.no_memory:
        tracemalloc.start()
    t0 = time.perf_counter()
    res = simulate(run, wl)
    wall = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] if not args.no_memory else float("nan")
    if profiler:
        profiler.stop()
        open(args.profile, "w").write(profiler.output_html())
    s = res.summary
    n = s["requests"]["arrived"]
    iters = s["pools"]["main"]["iterations"]
    print(f"workload: Azure conv x{args.rate_factor:g} = {n:,} requests over {wl.arrival_s[-1]:,.0f} s; "
          f"{args.instances} x llama3_8b on h100_sxm, continuous batching")
    print(f"busy fraction {s['pools']['main']['busy_fraction']:.2f} · completed {s['requests']['completed']:,} · "
          f"iterations {iters:,}")
    print(f"wall {wall:.2f} s · {n / wall:,.0f} simulated requests/s · {iters / wall:,.0f} iterations/s · "
          f"peak traced memory {peak / 2**20:,.0f} MiB")
    print(f"ratio to peer (Vidur 0.0.26, ~{PEER_REQ_PER_S:.0f} req/s): {n / wall / PEER_REQ_PER_S:,.1f}x · "
          f"target 50,000 req/s: {n / wall / 50_000:.2f} of target")


if __name__ == "__main__":
    main()
