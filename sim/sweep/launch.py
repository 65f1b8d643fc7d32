"""Sweep jobs on long-lived workers: the `workers` Hydra launcher (`hydra_plugins/inferplan_launcher/`), the default
of `python -m sim -m` (`conf/config.yaml`).

A job is what Hydra's own launchers make of it: the sweep config composed for the job's overrides
(`load_sweep_config`), numbered `initial_job_idx + i` (`hydra.job.num`; `hydra.job.id` is `<name>_<num>`, as the
joblib launcher sets it), then Hydra's `run_job` (the folder `hydra.sweep.dir/hydra.sweep.subdir`, its
`.hydra/config.yaml`, `hydra.yaml` and `overrides.yaml`, job logging, the job callbacks, the task). Only where it
runs differs: in a `sim.workers.WorkerPool` worker, which received the Hydra context, the sweep's config and Hydra's
global state once, when it started (during the launcher's `setup`, so the workers import while Hydra's sweeper
validates the batch), and then runs job after job. Hydra's sweeper composes every job here to validate the batch
before launching it; those configs are kept (`_KeptConfigs`) and sent with the jobs (about 18 kB pickled), so a job
is composed once, not again in its worker. With one worker the jobs run in this process.

Interrupts: the workers run in their own process group, so a Ctrl-C reaches this process only. It forwards the
signal once to every worker: a running job stops at an event boundary and writes its partial results (`status:
interrupted`), a job not yet started is skipped. Then the callbacks' `on_multirun_end` runs over the folders written
(`sweep.parquet`), and the sweep exits 128 + the signal with one line. A second signal ends the workers at once.
"""
from __future__ import annotations

import importlib
import logging
import os
import pickle
import signal
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import BrokenExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, run_job, setup_globals
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict

from inferplan.interrupts import SIGNALS, signals_raise, signum_of
from sim.results.write import mark_interrupted

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stopped:
    """A job's task ended the process's work with `SystemExit(code)` or a signal (its folder has what it wrote)."""

    job: int
    code: int


class _Worker:
    """What every job of one process needs: set once per worker (`_start_worker`), or here for inline jobs."""

    hydra_context: HydraContext
    config: DictConfig
    task: TaskFunction
    signum = 0          # a signal that arrived between jobs (the next job is skipped)


_WORKER = _Worker()


def _start_worker(payload: bytes) -> None:
    """A worker's initializer: its own process group (signals come from the launcher), then the sweep's Hydra
    context, config, task and Hydra's global state, unpickled once Hydra has scanned its plugins here: the scan
    executes the plugin modules again, which would leave classes in the state that are not those of the modules
    (the job's returned config could not be pickled back)."""
    os.setpgrp()

    def note(signum, frame) -> None:
        _WORKER.signum = _WORKER.signum or int(signum)
    for s in SIGNALS:
        signal.signal(s, note)
    from hydra.core.plugins import Plugins

    Plugins.instance()
    hydra_context, config, task, instances = pickle.loads(payload)
    Singleton._instances.update(instances)    # (Singleton.set_state would scan the plugins again)
    setup_globals()     # (Hydra's resolvers are lambdas: registered here rather than sent)
    _WORKER.hydra_context, _WORKER.config, _WORKER.task = hydra_context, config, _resolve_task(task)


def _task_reference(fn: TaskFunction) -> Any:
    """`fn` as (module, qualified name) when a fresh process can import it by that name (the module of `python -m
    sim` is `__main__` here, `sim.__main__` there; the name holds `hydra.main`'s wrapper of `fn`), else `fn`."""
    module = fn.__module__
    if module == "__main__":
        spec = getattr(sys.modules["__main__"], "__spec__", None)
        if spec is None:
            return fn
        module = spec.name
    try:
        found = _find(sys.modules[fn.__module__], fn.__qualname__)
    except (KeyError, AttributeError):
        return fn
    return (module, fn.__qualname__) if found is fn else fn


def _find(module: Any, qualname: str) -> Callable:
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return getattr(obj, "__wrapped__", obj)


def _resolve_task(ref: Any) -> TaskFunction:
    return _find(importlib.import_module(ref[0]), ref[1]) if isinstance(ref, tuple) else ref


def _run_job(idx: int, overrides: list[str], composed: bytes | None) -> JobReturn | Stopped | None:
    """One job, as Hydra's launchers run it: `composed` is its sweep config (pickled) when this process's launcher
    had it already, else it is composed here. None: skipped, a signal came first."""
    w = _WORKER
    if w.signum:
        return None
    if composed is not None:
        sweep_config = pickle.loads(composed)
    else:
        try:
            sweep_config = w.hydra_context.config_loader.load_sweep_config(w.config, list(overrides))
        except Exception as err:  # (a combination that does not compose: the sweeper raises it after the batch)
            ret = JobReturn(overrides=list(overrides), status=JobStatus.FAILED)
            ret.return_value = err
            return ret
    with open_dict(sweep_config):
        sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{idx}"
        sweep_config.hydra.job.num = idx
    if w.signum:
        return None
    try:
        with signals_raise():   # (a signal while Hydra sets the job up stops it; the task installs its own)
            return run_job(hydra_context=w.hydra_context, task_function=w.task, config=sweep_config,
                           job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")
    except SystemExit as stop:   # the task's exit after an interrupted run (partial results written)
        return Stopped(idx, stop.code if isinstance(stop.code, int) else 1)
    except KeyboardInterrupt as stop:   # before the task ran, or around it
        mark_interrupted(_job_dir(sweep_config), signum_of(stop), list(overrides))
        return Stopped(idx, 128 + signum_of(stop))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _job_dir(sweep_config: DictConfig) -> Path:
    """The job's folder, as Hydra's `run_job` makes it (`hydra.sweep.dir` / `hydra.sweep.subdir`)."""
    return Path(str(OmegaConf.select(sweep_config, "hydra.sweep.dir"))) / \
        str(OmegaConf.select(sweep_config, "hydra.sweep.subdir"))


class _KeptConfigs:
    """The sweep's config loader, keeping each sweep config it composes by its overrides: Hydra's sweeper composes
    every job once to validate the batch before it launches it, and a job then starts from that config instead of
    composing it again (in `hydra.launcher.workers` processes, a second composition was about 0.07 s a job)."""

    def __init__(self, loader: Any, master_config: DictConfig) -> None:
        self.loader, self.master_config = loader, master_config
        self.kept: dict[tuple[str, ...], bytes] = {}    # pickled (about 18 kB and 1.5 ms for a smoke job)

    def load_sweep_config(self, master_config: DictConfig, sweep_overrides: list[str]) -> DictConfig:
        cfg = self.loader.load_sweep_config(master_config, sweep_overrides)
        if master_config is self.master_config:
            self.kept[tuple(sweep_overrides)] = pickle.dumps(cfg)
        return cfg

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)


class Launch:
    """The `workers` launcher's state for one multirun: made at the launcher's `setup`, before the sweeper
    validates the jobs, so that the workers start and import while it does."""

    def __init__(self, hydra_context: HydraContext, config: DictConfig, task_function: TaskFunction,
                 workers: int | None) -> None:
        self.hydra_context, self.config, self.task_function = hydra_context, config, task_function
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.loader = hydra_context.config_loader
        self.configs = _KeptConfigs(self.loader, config)
        hydra_context.config_loader = self.configs   # (the sweeper validates through the same context)
        self._pool = self._start_pool() if self.workers > 1 else None

    def _start_pool(self):
        from sim.workers import WorkerPool

        context = HydraContext(config_loader=self.loader, callbacks=self.hydra_context.callbacks)
        payload = pickle.dumps((context, self.config, _task_reference(self.task_function),
                                Singleton.get_state()["instances"]))
        return WorkerPool(self.workers, _start_worker, (payload,))

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[JobReturn]:
        """Run one batch of jobs; their `JobReturn`s in the order of `job_overrides`."""
        config = self.config
        setup_globals()
        configure_log(config.hydra.hydra_logging, config.hydra.verbose)
        sweep_dir = Path(str(config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        n = len(job_overrides)
        log.info(f"Workers(workers={self.workers}) is launching {n} jobs")
        log.info(f"Launching jobs, sweep output dir : {sweep_dir}")
        for i, overrides in enumerate(job_overrides):
            log.info(f"\t#{initial_job_idx + i} : {' '.join(filter_overrides(overrides))}")
        runs: list[Any] = [None] * n
        if self.workers == 1:
            _WORKER.hydra_context = HydraContext(config_loader=self.loader, callbacks=self.hydra_context.callbacks)
            _WORKER.config, _WORKER.task = config, self.task_function
            try:
                for i, overrides in enumerate(job_overrides):
                    runs[i] = _run_job(initial_job_idx + i, list(overrides), self._composed(overrides))
                    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
                    if isinstance(runs[i], Stopped):
                        self._end_stopped(runs[i].code, sweep_dir)
            except KeyboardInterrupt as stop:   # (between two jobs)
                self._end_stopped(128 + signum_of(stop), sweep_dir)
            return runs
        pool, self._pool = self._pool or self._start_pool(), None    # (a next batch starts fresh workers)
        jobs = ((i, (initial_job_idx + i, list(overrides), self._composed(overrides)))
                for i, overrides in enumerate(job_overrides))
        code = 0
        try:
            for i, ret in pool.run(_run_job, jobs, in_flight=self.workers):
                runs[i] = ret
                if isinstance(ret, Stopped):    # (a worker was signalled directly)
                    code = ret.code
                    break
        except KeyboardInterrupt as stop:
            code = 128 + signum_of(stop)
        except BrokenExecutor as err:
            pool.close(abort=True)
            done = sum(isinstance(r, JobReturn) for r in runs)
            print(f"error: a worker process died ({err}); {done} of {n} jobs finished", file=sys.stderr)
            self._multirun_end()
            raise SystemExit(1) from None
        if not code:
            pool.close()
            return runs
        signum = code - 128 if code > 128 else int(signal.SIGINT)
        for pid in pool.pids():     # running jobs stop at an event boundary and write; idle workers skip the next
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass
        try:
            pool.close()
        except KeyboardInterrupt:   # a second signal: end the workers now
            pool.close(abort=True)
        self._end_stopped(code, sweep_dir)
        return runs

    def _composed(self, overrides: Sequence[str]) -> bytes | None:
        return self.configs.kept.pop(tuple(overrides), None)

    def _multirun_end(self) -> None:
        """The callbacks' end of the multirun over what was written (`sweep.parquet`); its exit status is ours."""
        try:
            self.hydra_context.callbacks.on_multirun_end(config=self.config)
        except SystemExit:
            pass

    def _end_stopped(self, code: int, sweep_dir: Path) -> None:
        self._multirun_end()
        print(f"interrupted: the jobs that ran (finished, or stopped with partial results) are in {sweep_dir}",
              file=sys.stderr)
        raise SystemExit(code)
