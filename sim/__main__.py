"""`python -m sim scenario=<name> [overrides]`: compose -> validate -> build the workload -> simulate -> write.

Results go to Hydra's run folder, `runs/<scenario>/<timestamp>/` (see docs/results.md); a compact summary table is
printed. Config mistakes exit with status 2 and one line on stderr.
"""
from __future__ import annotations

import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from inferplan.errors import exit_on_input_error
from inferplan.specs import CONF_DIR
from sim.api import run_composed
from sim.compose import compose_config
from sim.report import print_summary


def _sweep_variants(argv: list[str]) -> list[list[str]]:
    """Override lists to pre-validate a sweep: all first values, then each further value of each swept key with
    the others at their first (so `batching=continuous,nope` is caught before any job runs)."""
    swept = {}
    for i, a in enumerate(argv):
        if "=" in a:
            v = a.split("=", 1)[1]
            if "," in v and not v.startswith(("[", "{")) and "(" not in v:
                swept[i] = v.split(",")
    base = [f"{a.split('=', 1)[0]}={swept[i][0]}" if i in swept else a for i, a in enumerate(argv)]
    variants = [base]
    for i, values in swept.items():
        key = argv[i].split("=", 1)[0]
        for v in values[1:]:
            variants.append([f"{key}={v}" if j == i else o for j, o in enumerate(base)])
    return variants


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base=None)
def _task(cfg: DictConfig):
    with exit_on_input_error():
        hc = HydraConfig.get()
        summary, run_dir = run_composed(cfg, hc.runtime.output_dir)
    print_summary(summary, run_dir)
    return summary


def main() -> None:
    argv = sys.argv[1:]
    flags = [a for a in argv if a.startswith("-")]
    if all(f in ("-m", "--multirun") for f in flags):
        from sim.config import load_run_config
        with exit_on_input_error():
            for overrides in _sweep_variants([a for a in argv if not a.startswith("-")]):
                load_run_config(compose_config(overrides))
    _task()


if __name__ == "__main__":
    main()
