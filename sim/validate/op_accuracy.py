"""`python -m sim.validate.op_accuracy <systems> --hardware <hw|all> [--engine ...] [--write-doc]`: the measured
op grids' cross-validated error (`python -m calibrate.import_aic --report`) with the simulator's analytical model's
error on the same rows beside it, the table of docs/cost-model.md. The analytical pricing is the simulator's own
(`sim/validate/op_analytical.py`); calibration never imports the simulator, so the comparison runs from here."""
from __future__ import annotations

import sys

from calibrate.import_aic import main as import_main
from sim.validate.op_analytical import analytical_s


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--report" not in argv:
        argv.append("--report")
    if "--out" not in argv and "--no-write" not in argv:
        argv.append("--no-write")  # (a report: the shipped profiles are written by calibrate.import_aic)
    return import_main(argv, analytical=analytical_s, prog="python -m sim.validate.op_accuracy")


if __name__ == "__main__":
    sys.exit(main())
