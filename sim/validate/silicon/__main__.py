"""`python -m sim.validate.silicon [csv=<file>] [jobs=N] [limit=N] [systems=h100_sxm,h200_sxm] [ids=a,b]
[rounds=10] [cost=measured] [client=inferred|inferencex|fixed|source] [held_out=<fit.json>[,...]] [frontend=none]
[out=<dir>] [resume=true]`: simulate every row of a
measured-runs table (default: the shipped copy) and report the TTFT/TPOT errors per partition and concurrency
band, and the rows it cannot express by reason.

`jobs` worker processes (default 1); `limit` the first N rows after the `systems`/`ids` filters; `rounds` requests
per client (the benchmark client's 10). `cost` the cost model's profile for every row (`cost.profile`: `measured`
prices the kernels from the AIConfigurator grid of the row's GPU, `analytical` from the roofline, `auto` or a
profile path; default: the configured one). `client` the benchmark client whose lengths each request gets
(sim/validate/silicon/clients.py): `inferred` (default: per row by what its source's rows show: `fixed` for the
H100 SGLang gap-analysis rows, whose TPOT is that of rounds kept together, `inferencex` for the rest),
`inferencex` (uniform in [0.8 L, L], the data README's client), `fixed` (exactly ISL in, OSL out), `source`
(`fixed` for every row of AIConfigurator's gap-analysis collection, `inferencex` for the rest). `held_out` a fit
document (`python -m sim.validate.silicon.fit ... out=<fit.json>`; several, comma-separated: each engine from the one
that fits it):
each row's front-end time is the one fitted without its own model
(sim/validate/silicon/held_out.py), the held-out matrix the targets are scored on. `frontend=none` runs every row
with its engine preset's front-end time at zero (`fit.KEYS`): the base the front-end fit reads (`python -m
sim.validate.silicon.fit base=<out>/rows.csv`); the default `preset` keeps each preset's. Results go to `out` (default
runs/validate/silicon/<time>) as each row finishes: Ctrl-C keeps them, writes the report of what finished and
exits 130; `resume=true` with the same `out` (and options) runs only the rows its rows.csv lacks. Bad input: one
line, exit 2.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from inferplan.errors import InputError, exit_on_input_error
from inferplan.interrupts import signals_raise
from sim.validate.silicon.cli import flag, key_values, positive
from sim.validate.silicon.fit import ZERO
from sim.validate.silicon.held_out import HeldOut
from sim.validate.silicon.report import text_report, write_outputs
from sim.validate.silicon.runner import run_matrix
from sim.validate.silicon.simulate_row import client_option, cost_option
from sim.validate.silicon.table import CSV_PATH, read_table

OPTIONS = ("csv", "jobs", "limit", "systems", "ids", "rounds", "cost", "client", "held_out", "frontend", "out",
           "resume")
FRONTENDS = ("preset", "none")


def parse_args(argv: list[str]) -> dict:
    args = key_values(argv, OPTIONS)
    return {"csv": Path(args.get("csv") or CSV_PATH), "jobs": positive(args, "jobs", 1),
            "limit": positive(args, "limit", None), "rounds": positive(args, "rounds", 10),
            "systems": [s for s in args.get("systems", "").split(",") if s],
            "ids": [s for s in args.get("ids", "").split(",") if s],
            "resume": flag(args, "resume"), "cost": cost_option(args), "client": client_option(args),
            "held_out": args.get("held_out") or None, "frontend": _frontend(args),
            "out": Path(args.get("out") or Path("runs") / "validate" / "silicon" / time.strftime("%Y-%m-%d_%H-%M-%S"))}


def _frontend(args: dict) -> str:
    """`frontend=`: `preset` (default: each engine preset's fitted front-end time) or `none` (all of it zero)."""
    value = args.get("frontend", "preset")
    if value not in FRONTENDS:
        raise InputError("command line", "frontend", f"must be one of {', '.join(FRONTENDS)}, got {value!r}",
                         "give frontend=none for the base of a front-end fit")
    if value == "none" and args.get("held_out"):
        raise InputError("command line", "frontend", "frontend=none and held_out= both set the front-end time",
                         "give one of them")
    return value


def select(rows: list, systems: list[str], ids: list[str], limit: int | None) -> list:
    if systems:
        rows = [r for r in rows if r.system in systems]
    if ids:
        known = {r.id for r in rows}
        missing = [i for i in ids if i not in known]
        if missing:
            raise InputError("command line", "ids", f"no row {missing[0]!r} in the table",
                             "give ids of its `id` column")
        rows = [r for r in rows if r.id in set(ids)]
    return rows[:limit] if limit else rows


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return
    with exit_on_input_error():
        opts = parse_args(argv)
        rows = select(read_table(opts["csv"]), opts["systems"], opts["ids"], opts["limit"])
        if not rows:
            raise InputError("command line", "systems", "no row left after the filters", "widen systems=/ids=")
        held = HeldOut(opts["held_out"]) if opts["held_out"] else None
        if held is not None:
            held.check(rows)
        engine_keys = held.engine_keys if held else (_no_frontend if opts["frontend"] == "none" else None)
    print(f"silicon matrix: {len(rows)} rows of {opts['csv']}, jobs={opts['jobs']}, results -> {opts['out']}",
          flush=True)
    with signals_raise():
        run = run_matrix(rows, opts["out"], jobs=opts["jobs"], rounds=opts["rounds"], resume=opts["resume"],
                         cost=opts["cost"], client=opts["client"], engine_keys=engine_keys)
    options = {k: (str(v) if isinstance(v, Path) else v) for k, v in opts.items()}
    doc = write_outputs(run.records, opts["out"], opts["csv"], len(rows), options, run.wall_s,
                        interrupted=bool(run.interrupted_by))
    print(text_report(doc))
    print(f"results: {opts['out']} (rows.csv, rows.parquet, matrix.json, report.txt"
          + (", matrix.html, matrix.svg)" if "chart_html" in doc["files"] else ")"))
    if run.interrupted_by:
        print(f"interrupted: {doc['counts']['not_run']} rows not run", file=sys.stderr)
        raise SystemExit(128 + run.interrupted_by)


def _no_frontend(row) -> dict:
    """Every front-end key at zero, whatever the row's engine (`frontend=none`)."""
    return dict(ZERO)


if __name__ == "__main__":
    main()
