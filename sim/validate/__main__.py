"""`python -m sim.validate measured=<file> [scenario=<s>] [fit=true] [options] [Hydra overrides]`.

Options (everything else is a Hydra override of the simulator config, e.g. `scenario.pools.main.hardware=a100_80gb`):
`measured=` the log; `format=auto|vllm|sglang|table`; `out=` folder (default runs/validate/<log>/<time>);
`fit=true|false`; `overlay=` a fitted overlay yaml to apply; `run=` which result of an appended file;
`request_rate=` and `arrival_seed=` for logs without send times; `holdout_fraction=` (0.3) and `split_seed=` (0);
`max_model_len=`; `max_simulations=` (48). Input mistakes exit with status 2 and one line on stderr.
"""
from __future__ import annotations

import dataclasses
import sys

from inferplan.errors import InputError, exit_on_input_error
from sim.validate.pipeline import Options, run_validation
from sim.validate.report import print_report

CASTS = {"fit": "bool", "run": int, "request_rate": float, "arrival_seed": int, "holdout_fraction": float,
         "split_seed": int, "max_model_len": int, "max_simulations": int}


def parse_args(argv: list[str]) -> tuple[Options, list[str]]:
    """Split `key=value` arguments into the command's options and Hydra overrides."""
    names = {f.name for f in dataclasses.fields(Options)}
    opts, overrides = {}, []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep or key not in names:
            overrides.append(arg)
            continue
        cast = CASTS.get(key, str)
        if cast == "bool":
            if value.lower() not in ("true", "false"):
                raise InputError("command line", key, f"must be true or false, got {value!r}", f"give {key}=true")
            opts[key] = value.lower() == "true"
            continue
        try:
            opts[key] = cast(value)
        except ValueError:
            raise InputError("command line", key, f"is not a {cast.__name__}: {value!r}", f"give {key}=<{cast.__name__}>") from None
    if "measured" not in opts:
        raise InputError("command line", "measured", "missing", "give measured=<benchmark log: vLLM JSON, SGLang JSONL, CSV or Parquet>")
    if not 0 < opts.get("holdout_fraction", 0.3) < 1:
        raise InputError("command line", "holdout_fraction", "must be between 0 and 1", "give e.g. holdout_fraction=0.3")
    if opts.get("max_simulations", 48) < 12:
        raise InputError("command line", "max_simulations", "must be >= 12", "give e.g. max_simulations=48")
    return Options(**opts), overrides


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return
    with exit_on_input_error():
        opts, overrides = parse_args(argv)
        doc, out = run_validation(opts, overrides)
    print_report(doc, out)


if __name__ == "__main__":
    main()
