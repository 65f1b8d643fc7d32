"""`python -m sim.sweep <sweep folder>`: (re)write the folder's `sweep.parquet` from its job folders and print the
comparison table."""
from __future__ import annotations

import argparse
from pathlib import Path

from inferplan.errors import InputError, exit_on_input_error
from sim.sweep.callback import comparison_table
from sim.sweep.table import rows_from_folder, write_sweep
from sim.terminal import console


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sim.sweep", description=__doc__)
    parser.add_argument("folder", type=Path, help="a sweep folder (multirun/<scenario>/<time>)")
    args = parser.parse_args(argv)
    with exit_on_input_error():
        rows = rows_from_folder(args.folder)
        if not rows:
            raise InputError(args.folder, "folder", "holds no job folders (none has .hydra/overrides.yaml)",
                             "give the folder `python -m sim -m ...` printed")
        out = write_sweep(args.folder, rows)
    console().print(comparison_table(args.folder, rows))
    print(f"sweep: {out} ({len(rows)} jobs, {sum(r['status'] == 'completed' for r in rows)} completed)")


if __name__ == "__main__":
    main()
