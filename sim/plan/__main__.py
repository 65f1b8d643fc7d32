"""`python -m sim.plan scenario=<name> [overrides] [search.<key>=<choices> ...] [options]`: the cheapest fleet and
policy that meets the scenario's SLOs.

    python -m sim.plan scenario=smoke "search.scenario.pools.main.instances=range(1,9)" \\
        "search.batching=[continuous,chunked_prefill]" jobs=2

Options: jobs=N, ray_address=local|auto|ray://<head>:10001, out_dir=..., cache_dir=plans/.cache, cache=false,
objective=usd|usd_per_million_output_tokens|node_hours, progress=auto|true|false, mode=search|day (day: the
fewest prefill/decode units per window of a day, `python -m sim.plan scenario=deepseek_v3_day mode=day`),
check=true (the gate), redundancy=n+1 (every pool must also meet the SLOs with one instance failed at the
traffic's peak: sim/plan/redundancy.py), deploy=<folder> (the chosen configuration as engine launch commands,
Kubernetes objects, autoscaler, gateway settings and a bill of materials: sim/plan/deploy), confidence=0.9 (every
latency x its error band from the validation matrix at this level, 0.5/0.8/0.9/0.95; 0 or none: the point
estimate; the point-estimate choice and the difference's cost are shown beside: sim/plan/confidence.py), seeds=3
(the choice re-simulated on this many traffic seeds, the spread reported; 1: off: sim/plan/seeds.py). The month
is priced from the scenario's traffic curve (sim/plan/month.py). See docs/planning.md.
The first line printed is the verdict: PASS, or FAIL: <what the cheapest configuration misses>.
Exit status: 0 when a configuration meets the SLOs, 1 when none does (with or without check=true), 2 for bad input
(one line on stderr), 130/143 on SIGINT/SIGTERM (what finished is written, `plan.json` `status: interrupted`; the
cache resumes the rest).
"""
from __future__ import annotations

import shlex
import sys

from inferplan.interrupts import quiet_interrupts, signals_raise, signum_of

if __name__ == "__main__":  # (run as a program: Ctrl-C while the modules below import)
    quiet_interrupts("interrupted before any configuration ran; nothing written")

from inferplan.errors import exit_on_input_error  # noqa: E402
from sim.plan.console import print_plan  # noqa: E402
from sim.plan.options import parse_args  # noqa: E402
from sim.plan.planner import PlanInterrupted, plan  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__.strip())
        return 0
    if "mode=day" in argv:   # the day plan (sim/plan/day): units per window of a day, docs/planning.md
        from sim.plan.day.cli import main as day_main
        return day_main(argv)
    try:
        with signals_raise(), exit_on_input_error():
            request = parse_args(argv)
            doc, path = plan(request, shlex.join(["python", "-m", "sim.plan", *argv]))
    except PlanInterrupted as stop:
        print(f"interrupted after {stop.configurations} finished configurations; partial plan in {stop.path} "
              "(re-run the same command to resume)", file=sys.stderr)
        return stop.exit_code
    except KeyboardInterrupt as stop:
        print("interrupted before any configuration finished; nothing written", file=sys.stderr)
        return 128 + signum_of(stop)
    print_plan(doc, path)
    if request.options.deploy:
        if not doc["chosen"]:
            print(f"deploy: nothing written to {request.options.deploy}: no configuration meets every SLO",
                  file=sys.stderr)
        else:
            from sim.plan.deploy import write_deployment
            with exit_on_input_error():
                files = write_deployment(doc, path, request.options.deploy)
            print(f"deploy: {len(files)} files in {request.options.deploy} (README.md lists them)")
    return 0 if doc["chosen"] else 1


if __name__ == "__main__":
    sys.exit(main())
