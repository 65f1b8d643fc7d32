"""`python -m sim scenario=<name> [overrides]`: compose -> validate -> build the workload -> simulate -> write.

Results go to Hydra's run folder, `runs/<scenario>/<timestamp>/` (see docs/results.md); a compact summary table is
printed, its first line the verdict (`PASS` or `FAIL: <the SLOs it misses>`); with `check=true` a FAIL exits 1
once everything is written (in a sweep: the sweep exits 1 if any job missed). Config mistakes exit with status 2
and one line on stderr. SIGINT/SIGTERM stop the simulation at an event boundary, write what was simulated
(`status: interrupted`) and exit 130/143 with one line.

In a sweep (`-m`) a job that fails (a configuration that cannot be built, or a bug) does not stop the others: its
folder gets `FAILED` (the one-line error; a bug's traceback in `error.log`), `sweep.parquet` lists every job with its
status, and the sweep exits 1 after writing it.
"""
from __future__ import annotations

import sys

from inferplan.interrupts import quiet_interrupts

if __name__ == "__main__":  # (run as a program: Ctrl-C while the modules below import)
    quiet_interrupts("interrupted before the simulation ran; nothing written")

import traceback
from pathlib import Path

import hydra
from hydra import initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from inferplan.errors import InputError, exit_on_input_error
from inferplan.interrupts import signals_raise, signum_of
from inferplan.process import finish
from inferplan.specs import CONF_DIR
from sim.api import RunInterrupted, run_composed
from sim.config import RunConfig
from sim.compose import compose_config
from sim.report import print_summary
from sim.results.gate import passed
from sim.results.schema import ERROR_LOG, FAILED
from sim.results.write import mark_interrupted


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




def check_flag(cfg) -> bool:
    """The top-level `check` key (conf/config.yaml): a boolean, or one line and exit 2."""
    value = cfg.get("check", False)
    if not isinstance(value, bool):
        raise InputError("conf/config.yaml", "check", f"must be true or false, got {value!r}", "give check=true")
    return value


def _run_task(cfg: DictConfig, run: RunConfig | None = None):
    """The job: one run (or one job of a sweep) in the folder Hydra made for it (`run`: `cfg` validated)."""
    hc = HydraConfig.get()
    out_dir = Path(hc.runtime.output_dir)
    try:
        with signals_raise():
            if hc.mode == RunMode.MULTIRUN:
                return _sweep_job(cfg, out_dir)
            with exit_on_input_error():
                summary, run_dir = run_composed(cfg, out_dir, run=run)
    except RunInterrupted as stop:
        print(f"interrupted at simulated t = {stop.simulated_s:,.1f} s; partial results in {stop.run_dir}",
              file=sys.stderr)
        raise SystemExit(stop.exit_code) from None
    except KeyboardInterrupt as stop:
        if hc.mode == RunMode.MULTIRUN:
            mark_interrupted(out_dir, signum_of(stop))
        print(f"interrupted before the simulation ran; nothing written in {out_dir}", file=sys.stderr)
        raise SystemExit(128 + signum_of(stop)) from None
    print_summary(summary, run_dir)
    return summary


def _sweep_job(cfg: DictConfig, out_dir: Path):
    """One job of a sweep: a failure is written into its folder (and returned) instead of ending the sweep."""
    try:
        summary, run_dir = run_composed(cfg, out_dir)
    except InputError as err:
        return _job_failed(out_dir, str(err))
    except Exception as err:  # a bug: keep its traceback beside the job, let the other jobs run
        (out_dir / ERROR_LOG).write_text(traceback.format_exc())
        return _job_failed(out_dir, f"{type(err).__name__}: {err} (traceback in error.log)")
    print_summary(summary, run_dir)
    return summary


def _job_failed(out_dir: Path, message: str) -> dict:
    line = " ".join(message.split())
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / FAILED).write_text(line + "\n")
    print(f"error: job {out_dir.name}: {line}", file=sys.stderr)
    return {"status": "failed", "error": line}


_task = hydra.main(config_path=str(CONF_DIR), config_name="config", version_base=None)(_run_task)


def _single_run(argv: list[str]) -> int:
    """A plain run (no flags): composed once, validated, then run as Hydra's job. `hydra.main` would compose the
    config three times (once only to read `hydra.mode`, once more in `Hydra.run`), re-reading every config file
    (0.15-0.25 s a composition here). This is `Hydra.run` after its composition (callbacks, `run_job`), so the run
    folder, its `.hydra/` files and logging are the same; the folder is made only once the config is valid."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra._internal.callbacks import Callbacks
    from hydra.core.utils import run_job
    from hydra.types import HydraContext

    from sim.compose import compose_run, task_config
    from sim.config import load_run_config

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None, job_name="__main__"):
        hy = GlobalHydra.instance().hydra
        with exit_on_input_error():  # (refused here: no run folder is made)
            cfg = compose_run(hy, [*argv, "hydra.mode=RUN"])  # (as hydra.main records it)
            run = load_run_config(task_config(cfg))
            check = check_flag(cfg)
        callbacks = Callbacks(cfg)
        callbacks.on_run_start(config=cfg, config_name="config")
        ret = run_job(hydra_context=HydraContext(config_loader=hy.config_loader, callbacks=callbacks),
                      task_function=lambda c: _run_task(c, run), config=cfg, job_dir_key="hydra.run.dir",
                      job_subdir_key=None, configure_logging=True)
        callbacks.on_run_end(config=cfg, config_name="config", job_return=ret)
        summary = ret.return_value  # (re-raises what the job raised)
    # the gate: with check=true a run that misses an SLO exits 1, after its folder and summary are written
    return 1 if check and not passed(summary) else 0


def main() -> int | None:
    """The CLI; the exit status of a plain run (one simulation in this process: no launcher, no worker), None for
    a sweep (Hydra's launcher ends it)."""
    argv = sys.argv[1:]
    flags = [a for a in argv if a.startswith("-")]
    try:
        with signals_raise():
            if not flags and not any(a.startswith(("hydra.mode", "+hydra.mode", "++hydra.mode")) for a in argv):
                return _single_run(argv)
            if all(f in ("-m", "--multirun") for f in flags):
                from sim.config import load_run_config
                with exit_on_input_error():
                    for overrides in _sweep_variants([a for a in argv if not a.startswith("-")]):
                        load_run_config(compose_config(overrides))
            _task()
            return None
    except KeyboardInterrupt as stop:  # before a run folder exists (composition, validation)
        print("interrupted before the simulation ran; nothing written", file=sys.stderr)
        raise SystemExit(128 + signum_of(stop)) from None


if __name__ == "__main__":
    code = main()
    if code is not None:
        finish(code)  # (a plain run that ended normally: its files are written; skip freeing its objects one by one)
