"""Speed on the peer's own workload: Vidur's four traces and setup, run by `python -m sim`, against its timings.

The traces, setup and timings are in `<shared>/vidur-workload/` (README.md there; `inferplan.paths.shared_root()`).
Each run is the user's command, `python -m sim` in a fresh process (imports, composition, loading the trace,
simulation and writing the run folder all count), with the setup mapped onto our configuration:

| Vidur | ours |
|---|---|
| Llama-2-70B bf16, TP2, one stage, A100-80GB | `model=llama2_70b`, `hardware=a100_80gb`, `tp=2` |
| memory margin 0.1 (README: about 53,000 KV tokens per replica), KV blocks of 16 tokens | `gpu_memory_utilization=0.9`,
  `num_gpu_blocks_override=3312` (53,000 / 16), `block_size_tokens=16` |
| round-robin over 1 or 4 replicas | `router=round_robin`, `instances=1|4` |
| `vllm`: no chunked prefill, <= 128 requests, <= 4,096 tokens a batch | `batching=continuous`, `max_num_seqs=128`, `token_budget=4096` |
| `sarathi`: chunks of 512 tokens, <= 128 requests | `batching=chunked_prefill`, `token_budget=512`, `max_num_seqs=128` |

The trace's columns are renamed into our generic CSV (`arrival_s, prompt_tokens, output_tokens`) once, before any
timing. Per run it prints the whole process (wall clock of the child), the simulation loop (`summary.json`
`wall_time_s`), the SimPy events processed (an extra in-process run of the same configuration that counts the
events taken off the queue; untimed), the child's peak resident memory (`wait4` rusage), and the ratios to Vidur.

Vidur's times are scaled to this machine as the README says: its re-measured 40,000-request times times
`reference_s / 2.094`, with `reference_s` from its `machine_speed.py` run in this process, just before the runs.
The smaller runs were timed only on a faster machine of unknown reference speed (`vidur-timings.csv`); their
scaled times are estimates: the older time times the re-measured / older ratio of the same scheduler's
40,000-request run, times `reference_s / 2.094` (marked `~`). Last line, for the 40,000-request 4-replica vLLM run:
`vidur workload: loop <x>x, whole process <y>x, peak <m> MB`.

    python bench/vidur_workload.py [--only c_vllm_4r_n40000 ...] [--keep DIR] [--set cost.profile=analytical ...]

`--set` adds a Hydra override to every run (and to the event count), e.g. `cost.profile=analytical` to price from
the datasheet roofline instead of the default, the AIConfigurator grid of the A100 (docs/cost-model.md, "Measured
grids").
"""
from __future__ import annotations

import argparse
import csv
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from inferplan.paths import shared_root
from sim.results.read import read_summary

REPO = Path(__file__).resolve().parent.parent
REMEASURED_REFERENCE_S = 2.094   # machine_speed.py on the machine of vidur-timings-remeasured.csv (README)
FLAGSHIP = "c_vllm_4r_n40000"
KV_BLOCKS = 53_000 // 16     # README: "about 53,000 KV tokens per replica", in blocks of 16 tokens

SCHEDULERS = {  # Vidur scheduler -> our overrides (see the table above)
    "vllm": ["batching=continuous", "batching.token_budget=4096", "batching.max_num_seqs=128"],
    "sarathi": ["batching=chunked_prefill", "batching.token_budget=512", "batching.max_num_seqs=128"],
}


def folder() -> Path:
    return shared_root() / "vidur-workload"


def read_timings(path: Path) -> dict[str, dict]:
    with path.open() as f:
        return {row["run"]: row for row in csv.DictReader(f)}


def convert_trace(src: Path, dst: Path) -> None:
    """Vidur's columns (`arrived_at`, `num_prefill_tokens`, `num_decode_tokens`) -> our generic CSV."""
    with src.open() as f, dst.open("w", newline="") as g:
        rows = csv.DictReader(f)
        out = csv.writer(g)
        out.writerow(["arrival_s", "prompt_tokens", "output_tokens"])
        for r in rows:
            out.writerow([r["arrived_at"], r["num_prefill_tokens"], r["num_decode_tokens"]])


def overrides(sched: str, replicas: int, trace: Path) -> list[str]:
    return ["scenario=smoke", "~scenario.traffic", f"+scenario.traffic={{kind:trace,format:generic,path:'{trace}'}}",
            "scenario.pools.main.model=llama2_70b", "scenario.pools.main.hardware=a100_80gb",
            "+scenario.pools.main.tp=2", f"scenario.pools.main.instances={replicas}",
            "+scenario.pools.main.gpu_memory_utilization=0.9", "+scenario.pools.main.block_size_tokens=16",
            f"+scenario.pools.main.num_gpu_blocks_override={KV_BLOCKS}",
            "router=round_robin", "scenario.frontend_overhead_s=0", "metrics.progress=false", *SCHEDULERS[sched]]


def run_process(args: list[str], out_dir: Path) -> dict:
    """`python -m sim <args>` into out_dir: wall seconds, the child's peak RSS and its summary."""
    cmd = [sys.executable, "-m", "sim", *args, f"hydra.run.dir={out_dir}"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read().decode() if proc.stderr else ""  # (before waiting: a full pipe would block the child)
    _, status, usage = os.wait4(proc.pid, 0)
    wall_s = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"python -m sim failed (exit {proc.returncode}): {err.strip().splitlines()[-1:]}")
    summary = read_summary(out_dir)
    return {"wall_s": wall_s, "peak_mb": usage.ru_maxrss / 1024.0, "summary": summary}


def count_events(args: list[str]) -> int:
    """SimPy events taken off the queue in an in-process run of the same configuration (Vidur's `events`)."""
    import simpy

    from sim.api import scenario_workload
    from sim.compose import compose_config
    from sim.config import load_run_config
    from sim.simulate import simulate

    envs = []
    init = simpy.Environment.__init__

    def keep(self, *a, **k):
        init(self, *a, **k)
        envs.append(self)

    run = load_run_config(compose_config(args))
    simpy.Environment.__init__ = keep
    try:
        simulate(run, scenario_workload(run))
    finally:
        simpy.Environment.__init__ = init
    env = envs[-1]
    return next(env._eid) - len(env._queue)  # scheduled minus left in the queue at the end


def machine_reference_s(src: Path) -> float:
    spec = importlib.util.spec_from_file_location("vidur_machine_speed", src)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return min(mod._run() for _ in range(3))


def peer_times(name: str, old: dict, new: dict, scale: float) -> tuple[float, float, bool]:
    """Vidur's (whole process, loop) seconds scaled to this machine; True when estimated from the older table."""
    if name in new:
        return float(new[name]["wall_s"]) * scale, float(new[name]["event_loop_s"]) * scale, False
    row = old[name]
    ref = next(r for r in new.values() if r["sched"] == row["sched"])  # the same scheduler's 40k run
    wall_k = float(ref["wall_s"]) / float(old[ref["run"]]["wall_s"])
    loop_k = float(ref["event_loop_s"]) / float(old[ref["run"]]["event_loop_s"])
    return float(row["wall_s"]) * wall_k * scale, float(row["event_loop_s"]) * loop_k * scale, True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=None, help="run names of vidur-timings.csv (default: all eight)")
    ap.add_argument("--keep", default=None, help="write the run folders under this directory")
    ap.add_argument("--no-events", action="store_true", help="skip the extra in-process runs that count events")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an extra Hydra override for every run, e.g. cost.profile=measured (repeatable)")
    args = ap.parse_args()
    src = folder()
    if not (src / "vidur-timings.csv").is_file():
        print(f"vidur workload: skipped ({src} is absent; set INFERPLAN_SHARED_ROOT)")
        return 0
    old, new = read_timings(src / "vidur-timings.csv"), read_timings(src / "vidur-timings-remeasured.csv")
    names = args.only or list(old)
    unknown = [n for n in names if n not in old]
    if unknown:
        print(f"unknown run {unknown[0]!r}; valid: {', '.join(old)}", file=sys.stderr)
        return 2
    load = os.getloadavg()
    ref_s = machine_reference_s(src / "machine_speed.py")
    scale = ref_s / REMEASURED_REFERENCE_S
    print(f"machine_speed reference_s={ref_s:.3f} (re-measured Vidur machine {REMEASURED_REFERENCE_S}): Vidur's "
          f"times x {scale:.3f}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    head = (f"{'run':<20} {'requests':>8} {'whole_s':>8} {'loop_s':>7} {'events':>9} {'peak_MB':>8} "
            f"{'vidur_whole_s':>13} {'vidur_loop_s':>12} {'whole_x':>8} {'loop_x':>7} {'vidur_MB':>8}")
    print(head)
    print("-" * len(head))
    flagship = None
    with tempfile.TemporaryDirectory(prefix="vidur_workload_") as tmp:
        root = Path(args.keep) if args.keep else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        traces: dict[str, Path] = {}
        for name in names:
            row = old[name]
            if row["trace"] not in traces:
                traces[row["trace"]] = root / ("generic_" + row["trace"])
                convert_trace(src / row["trace"], traces[row["trace"]])
            ov = overrides(row["sched"], int(row["replicas"]), traces[row["trace"]]) + list(args.set)
            r = run_process(ov, root / name)
            s = r["summary"]
            events = 0 if args.no_events else count_events(ov)
            loop_s = float(s["wall_time_s"])
            v_wall, v_loop, est = peer_times(name, old, new, scale)
            mark = "~" if est else " "
            peak_v = float(new[name]["peak_rss_mb"]) if name in new else float(row["peak_rss_mb"])
            print(f"{name:<20} {s['requests']['arrived']:>8,} {r['wall_s']:>8.2f} {loop_s:>7.2f} {events:>9,} "
                  f"{r['peak_mb']:>8.0f} {mark}{v_wall:>12.1f} {mark}{v_loop:>11.1f} {v_wall / r['wall_s']:>7.1f}x "
                  f"{v_loop / loop_s:>6.1f}x {peak_v:>8.0f}", flush=True)
            if s["requests"]["completed"] != s["requests"]["arrived"]:
                print(f"  note: {s['requests']['completed']:,} of {s['requests']['arrived']:,} completed")
            if name == FLAGSHIP:
                flagship = (v_loop / loop_s, v_wall / r["wall_s"], r["peak_mb"])
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if flagship is not None:
        print(f"vidur workload: loop {flagship[0]:.0f}x, whole process {flagship[1]:.0f}x, peak {flagship[2]:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
