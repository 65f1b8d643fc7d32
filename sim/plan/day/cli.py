"""`python -m sim.plan scenario=<name> mode=day [options] [overrides]` (dispatched from sim/plan/__main__.py)."""
from __future__ import annotations

import shlex

from inferplan.errors import exit_on_input_error
from sim.plan.day.options import parse_day_args
from sim.plan.day.planner import plan_day
from sim.plan.day.report import print_day


def main(argv: list[str]) -> int:
    with exit_on_input_error():
        opts, overrides = parse_day_args(argv)
        doc, path = plan_day(opts, overrides, shlex.join(["python", "-m", "sim.plan", *argv]))
    simulated = [w for w in doc["windows"] if w["rounds"]]
    missed = [str(w["index"]) for w in simulated if not w["verified"]]
    # the gate's first line (sim/results/gate.py): PASS, or the windows whose simulated units miss the SLOs
    if missed:
        print(f"FAIL: {len(missed)} of {len(simulated)} simulated windows miss the SLOs with their units "
              f"(windows {', '.join(missed)})")
    elif not simulated:  # (verify=none: the capacity rule only; passing is not shown by anything here)
        print("UNVERIFIED: no window simulated (verify=none); the fleet is the capacity rule's, not checked "
              "against the SLOs")
    else:
        print("PASS")
    print_day(doc, path)
    return 0 if not missed else 1
