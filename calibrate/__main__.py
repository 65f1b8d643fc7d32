"""`python -m calibrate hardware=<name> model=<name> [key=value ...]`: compose, run, report.

Config mistakes print one line naming the key and the valid choices and exit 2. Progress goes to stderr from the
start (calibrate.progress). SIGINT or SIGTERM stops the run within about a second: what was measured is written
to out_dir/measurements.parquet (the next run resumes from it), one line says where, and the exit status is 130
(SIGINT) or 143 (SIGTERM). The campaign runs in a worker thread so that a signal is taken even while a long
library call holds it (calibrate.control).
"""
from __future__ import annotations

import os
import sys
import time

from inferplan.errors import exit_on_input_error


def _interrupted_line(signame: str, out_dir: object) -> str:
    from pathlib import Path

    path = Path(str(out_dir)) / "measurements.parquet"
    if not path.exists():
        return f"interrupted ({signame}) before anything was measured; nothing written"
    import pyarrow.parquet as pq

    rows = pq.read_metadata(path).num_rows
    return (f"interrupted ({signame}): {rows} measurements kept in {path.parent}; re-run the same command to "
            "resume")


def main(argv: list[str] | None = None) -> int:
    started_s = time.monotonic()
    argv = sys.argv[1:] if argv is None else list(argv)
    from calibrate.config import compose_settings, usage

    if any(a in ("-h", "--help", "help") for a in argv):
        print(usage())
        return 0
    with exit_on_input_error():
        settings = compose_settings(argv)
        from calibrate.control import Control, Interrupted, run_interruptible
        from calibrate.progress import Reporter

        reporter = Reporter(settings.progress, deadline_s=started_s + settings.budget_s, start_s=started_s)
        reporter.line(f"calibrate {settings.hardware} / {settings.model}: budget {settings.budget_s:g} s, "
                      f"writing into {settings.out_dir}; loading torch")
        control = Control()

        def work() -> object:
            from calibrate.run import run_calibration

            return run_calibration(settings, control=control, reporter=reporter, started_s=started_s)

        def abandon() -> None:  # the worker is inside a long library call: flush its store from here
            if control.flush is not None:
                try:
                    control.flush()
                except Exception as err:  # report, still leave promptly
                    print(f"could not write the measurements: {type(err).__name__}: {err}", file=sys.stderr)

        try:
            result = run_interruptible(work, control, abandon)
        except Interrupted as stop:
            reporter.abort()
            print(_interrupted_line(str(stop), settings.out_dir), file=sys.stderr, flush=True)
            if stop.abandoned:  # the worker thread cannot be joined: leave without waiting for it
                sys.stdout.flush()
                os._exit(stop.exit_code)
            return stop.exit_code
        from calibrate.report import print_report

        print_report(result)
    return 0


if __name__ == "__main__":
    code = main()
    if code in (130, 143):  # interrupted: the measurements are on disk and the line printed; leave without the
        # interpreter's teardown (unloading torch takes longer than the rest of the interrupt path)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
