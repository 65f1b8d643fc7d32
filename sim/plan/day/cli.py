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
    print_day(doc, path)
    simulated = [w for w in doc["windows"] if w["rounds"]]
    return 0 if all(w["verified"] for w in simulated) else 1
