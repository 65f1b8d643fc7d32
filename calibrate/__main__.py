"""`python -m calibrate hardware=<name> model=<name> [key=value ...]`: compose, run, report.

Config mistakes print one line naming the key and the valid choices and exit 2; Ctrl-C keeps what was measured
(the next run resumes) and exits 130.
"""
from __future__ import annotations

import sys

from inferplan.errors import exit_on_input_error


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    from calibrate.config import compose_settings, usage

    if any(a in ("-h", "--help", "help") for a in argv):
        print(usage())
        return 0
    with exit_on_input_error():
        settings = compose_settings(argv)
        from calibrate.report import print_report
        from calibrate.run import run_calibration

        try:
            result = run_calibration(settings)
        except KeyboardInterrupt:
            print(f"interrupted: measurements kept in {settings.out_dir}; re-run the same command to resume",
                  file=sys.stderr)
            return 130
        print_report(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
