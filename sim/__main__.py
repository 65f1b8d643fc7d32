"""`python -m sim scenario=<name> [overrides]`: compose -> validate -> build the workload -> simulate -> write.

Results go to Hydra's run folder, `runs/<scenario>/<timestamp>/` (see docs/results.md); a compact summary table is
printed. Config mistakes exit with status 2 and one line on stderr.
"""
from __future__ import annotations

import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from inferplan.errors import InputError, exit_on_input_error
from inferplan.specs import CONF_DIR
from sim.api import run_composed
from sim.compose import compose_config
from sim.report import print_summary


def _first_values(argv: list[str]) -> list[str]:
    """For multirun pre-validation: each sweep override `k=a,b` reduced to its first value `k=a`."""
    out = []
    for a in argv:
        if "=" in a and "," in a.split("=", 1)[1] and not a.split("=", 1)[1].startswith(("[", "{")):
            k, v = a.split("=", 1)
            out.append(f"{k}={v.split(',')[0]}")
        else:
            out.append(a)
    return out


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
        overrides = _first_values([a for a in argv if not a.startswith("-")])
        with exit_on_input_error():
            from sim.config import load_run_config
            load_run_config(compose_config(overrides))
    _task()


if __name__ == "__main__":
    main()
