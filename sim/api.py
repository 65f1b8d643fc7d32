"""Library entry points: run a scenario from Python (the dashboard's what-if, tests, the planner)."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from omegaconf import OmegaConf

from inferplan.errors import InputError
from inferplan.interrupts import Interrupted, signals_deferred
from scenarios import build_workload
from scenarios.rng import stream
from scenarios.transforms import scale_rate
from sim.compose import compose_config
from sim.config import RunConfig, load_run_config
from sim.results.write import write_run
from sim.simulate import simulate


class RunInterrupted(Interrupted):
    """The simulation stopped on SIGINT/SIGTERM; its partial results (status `interrupted`) are in `run_dir`."""

    def __init__(self, signum: int, simulated_s: float, run_dir: Path) -> None:
        super().__init__(signum)
        self.simulated_s, self.run_dir = simulated_s, run_dir


def run_composed(cfg, run_dir: str | Path, progress: Callable[[float], None] | None = None,
                 run: RunConfig | None = None) -> tuple[dict, Path]:
    """Validate a composed config, simulate it and write the run folder; returns (summary, folder). `run` is
    `cfg` already validated (the CLI validates before Hydra makes the run folder), so it is not validated twice.

    A signal during the simulation stops it at an event boundary: the folder is written with what was simulated
    (`summary.json` `status: interrupted`, requests in flight `unfinished`), then `RunInterrupted` is raised. A
    signal while the folder is written waits until it is complete.
    """
    if run is None:
        run = load_run_config(cfg)
    workload = scenario_workload(run)
    if progress is None:
        progress = _terminal_progress(run.metrics.progress)
    result = simulate(run, workload, progress)
    with signals_deferred():
        out = write_run(result, run_dir)
    if result.interrupted_by:
        raise RunInterrupted(result.interrupted_by, result.summary["simulated_duration_s"], out)
    return result.summary, out


def scenario_workload(run):
    """The scenario's requests, with `scenario.load_multiplier` applied (rate scaling from its own stream)."""
    workload = build_workload(run.scenario.traffic, run.seed, file=f"scenario/{run.scenario.name}")
    m = run.scenario.load_multiplier
    if m <= 0:
        raise InputError(f"scenario/{run.scenario.name}", "load_multiplier", f"must be > 0, got {m}", "use e.g. 1.5")
    if m != 1.0:
        workload = scale_rate(workload, m, stream(run.seed, "load_multiplier"))
    return workload


def run_scenario(scenario: str, overrides: list[str], run_dir: Path,
                 progress: Callable[[float], None] | None = None) -> Path:
    """Compose `scenario=<scenario>` plus Hydra-syntax `overrides`, simulate, write into `run_dir`.

    Also writes `.hydra/config.yaml` so the folder looks like a CLI run. `progress` gets the fraction (0..1) of
    simulated time done. Raises `InputError` for bad overrides.
    """
    cfg = compose_config([f"scenario={scenario}", *overrides])
    run_dir = Path(run_dir)
    (run_dir / ".hydra").mkdir(parents=True, exist_ok=True)
    (run_dir / ".hydra" / "config.yaml").write_text(OmegaConf.to_yaml(cfg))
    (run_dir / ".hydra" / "overrides.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create([f"scenario={scenario}", *overrides])))
    _, out = run_composed(cfg, run_dir, progress or (lambda f: None))
    return out


def _terminal_progress(setting):
    """A rich progress bar over simulated time when stderr is a terminal (or when forced with `true`)."""
    import sys

    if setting is False or setting == "false" or (setting == "auto" and not sys.stderr.isatty()):
        return None
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("simulating"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"), TimeElapsedColumn(),
                   transient=True)
    task = bar.add_task("sim", total=1.0)
    bar.start()

    def update(fraction: float) -> None:
        bar.update(task, completed=fraction)
        if fraction >= 1.0:
            bar.stop()
    return update


def write_plan_deployment(plan_folder: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Write the deployment of a plan folder's chosen configuration (engine launch commands, Kubernetes objects,
    autoscaler, gateway settings, bill of materials: sim/plan/deploy) into `out_dir` (default
    `<plan folder>/deploy`), as `python -m sim.plan ... deploy=<dir>` writes it; returns the files written. An
    `InputError` when the folder holds no plan.json or the plan chose nothing."""
    from sim.plan.deploy import write_deployment
    from inferplan.config.yaml_files import read_yaml_mapping

    plan_path = Path(plan_folder) / "plan.json"
    if not plan_path.is_file():
        raise InputError(str(plan_folder), "plan.json", "not found", "pick a folder written by python -m sim.plan")
    doc = read_yaml_mapping(plan_path)  # (JSON is YAML: the one reader, with its one-line refusal)
    return write_deployment(doc, plan_path, Path(out_dir) if out_dir is not None else plan_path.parent / "deploy")
