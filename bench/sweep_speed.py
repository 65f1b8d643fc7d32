"""Sweep throughput: 1,000 configurations of the `smoke` scenario on every core, in long-lived workers.

The grid is instances (1-5) x batching (continuous, chunked_prefill, dynamic, static) x router (the five of
conf/router/) x load multiplier (ten values from 0.5 to 2.75): 5 x 4 x 5 x 10 = 1,000 configurations (`--configs N`
takes the first N in that order, spread evenly over the grid). Composition is done once per (batching, router)
pair in this process (Hydra, then resolved into plain containers); the instance count and the load multiplier are
set in those containers, which is what composing each override list gives. The configurations run in a
`sim.workers.WorkerPool` (the pool `python -m sim.plan` uses): each worker imports the simulator once and then
simulates configuration after configuration, writing each run folder as `python -m sim` would. The wall time
counts everything from the first composition to the last folder written, worker start-up included. Last line:
`sweep: <N> configurations in <S> s (<R> per minute)`.

    python bench/sweep_speed.py [--configs 1000] [--workers <cores>] [--keep DIR]
"""
from __future__ import annotations

import argparse
import copy
import itertools
import os
import tempfile
import time
from pathlib import Path

INSTANCES = (1, 2, 3, 4, 5)
BATCHING = ("continuous", "chunked_prefill", "dynamic", "static")
ROUTERS = ("least_outstanding", "round_robin", "least_kv", "length_aware", "prefix_affinity")
LOADS = tuple(0.5 + 0.25 * i for i in range(10))


def grid(n: int) -> list[tuple[int, str, str, float]]:
    full = list(itertools.product(INSTANCES, BATCHING, ROUTERS, LOADS))
    if n >= len(full):
        return full
    step = len(full) / n
    return [full[int(i * step)] for i in range(n)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--keep", default=None, help="write the run folders under this directory")
    args = ap.parse_args()
    t0 = time.perf_counter()
    from omegaconf import OmegaConf

    from sim.compose import compose_config
    from sim.plan.executors import simulate_job
    from sim.workers import WorkerPool

    pool = WorkerPool(args.workers)  # (workers start and import while this process composes)
    configs = grid(args.configs)
    base: dict[tuple[str, str], dict] = {}
    with tempfile.TemporaryDirectory(prefix="sweep_speed_") as tmp:
        root = Path(args.keep) if args.keep else Path(tmp)
        tasks = []
        for i, (instances, batching, router, load) in enumerate(configs):
            if (batching, router) not in base:
                cfg = compose_config(["scenario=smoke", f"batching={batching}", f"router={router}",
                                      "metrics.progress=false"])
                base[(batching, router)] = OmegaConf.to_container(cfg, resolve=True)
            cfg = copy.deepcopy(base[(batching, router)])
            cfg["scenario"]["pools"]["main"]["instances"] = instances
            cfg["scenario"]["load_multiplier"] = load
            overrides = ("scenario=smoke", f"batching={batching}", f"router={router}",
                         f"scenario.pools.main.instances={instances}", f"scenario.load_multiplier={load}")
            tasks.append((i, (cfg, overrides, str(root / str(i)))))
        done = failed = requests = 0
        try:
            for _, outcome in pool.run(simulate_job, tasks):
                done += 1
                if "error" in outcome:
                    failed += 1
                else:
                    requests += outcome["summary"]["requests"]["arrived"]
                if done % 100 == 0:
                    print(f"  {done} done, {time.perf_counter() - t0:.0f} s", flush=True)
        finally:
            pool.close()
    wall = time.perf_counter() - t0
    print(f"workers {args.workers} · {len(base)} compositions · {requests:,} simulated requests · "
          f"{failed} configurations refused · load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"sweep: {done} configurations in {wall:.0f} s ({done / wall * 60:.0f} per minute)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
