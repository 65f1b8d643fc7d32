"""Evaluating configurations: compose each one, look its hash up in the cache, simulate the misses in parallel.

A configuration is identified by its search overrides (one per dimension); evaluating the same one twice in a plan
costs nothing, and two spellings that resolve to the same config share one simulation. With a `companion` (the
N+1 failure overrides, sim/plan/redundancy.py) each configuration is also run with those overrides added, in the
same batch; that run hangs off its configuration (`Outcome.failure_run`) and is not a configuration of its own.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from omegaconf import OmegaConf

from inferplan.errors import InputError
from inferplan.interrupts import signals_deferred
from sim.compose import compose_config
from sim.plan.cache import RunCache, config_hash
from sim.plan.executors import Task
from sim.results.read import try_summary

NO_PROGRESS = ("metrics.progress=false",)


@dataclass
class Outcome:
    """What one configuration gave."""

    id: int                                  # order of first request in this plan (also its job number)
    overrides: tuple[str, ...]               # the search's choices
    key: str = ""                            # config hash ("" when it did not compose)
    status: str = "completed"                # completed | invalid
    summary: dict | None = None
    error: str = ""
    run_dir: Path | None = None              # the cached run folder
    cached: bool = False                     # found in the cache (not simulated by this plan)
    config: dict = field(default_factory=dict, repr=False)
    failure_run: Outcome | None = None       # the same configuration with one instance failed (N+1), if asked


class Progress(Protocol):
    """What the evaluator reports: simulations started (a count), each one finished, each cache hit."""

    def started(self, n: int) -> None: ...
    def simulated(self) -> None: ...
    def reused(self) -> None: ...


class NoProgress:
    def started(self, n: int) -> None:
        pass

    def simulated(self) -> None:
        pass

    def reused(self) -> None:
        pass


class Evaluator:
    """Memoised evaluation of configurations: `base` overrides + each configuration's own."""

    def __init__(self, base: tuple[str, ...], cache: RunCache, executor, use_cache: bool = True,
                 progress: Progress | None = None, companion: tuple[str, ...] = ()):
        self.base, self.cache, self.executor, self.use_cache = tuple(base), cache, executor, use_cache
        self.companion = tuple(companion)  # overrides of each configuration's second (failure) run; () none
        self.progress = progress or NoProgress()
        self.outcomes: dict[tuple[str, ...], Outcome] = {}
        self.simulated = 0
        self._fresh: set[str] = set()        # hashes simulated by this plan (cache=false re-runs each only once)

    def compose(self, overrides: tuple[str, ...]) -> dict:
        cfg = compose_config([*self.base, *overrides, *NO_PROGRESS])
        return OmegaConf.to_container(cfg, resolve=True)

    def evaluate(self, batch: list[tuple[str, ...]]) -> list[Outcome]:
        """Outcomes of `batch` (configurations as override tuples), simulating those not known yet."""
        todo: dict[str, list[Outcome]] = {}
        for overrides in batch:
            if overrides in self.outcomes:
                continue
            out = self.outcomes[overrides] = Outcome(len(self.outcomes), tuple(overrides))
            self._look_up(out, todo)
            if self.companion and out.status == "completed":
                out.failure_run = Outcome(out.id, (*overrides, *self.companion))
                self._look_up(out.failure_run, todo)
        if todo:
            self._simulate(todo)
        return [self.outcomes[o] for o in batch]

    def _look_up(self, out: Outcome, todo: dict[str, list[Outcome]]) -> None:
        """Compose `out`'s configuration and take its result from the cache, or add it to `todo` (by hash)."""
        try:
            out.config = self.compose(out.overrides)
        except InputError as err:
            out.status, out.error = "invalid", str(err)
            return
        out.key = config_hash(out.config)
        cached = self.cache.summary(out.key) if (self.use_cache or out.key in self._fresh) else None
        if cached is not None:
            out.summary, out.run_dir, out.cached = cached, self.cache.path(out.key), out.key not in self._fresh
            self.progress.reused()
        else:
            todo.setdefault(out.key, []).append(out)

    def _simulate(self, todo: dict[str, list[Outcome]]) -> None:
        tasks = [Task(key, outs[0].config, (*self.base, *outs[0].overrides), str(self.cache.staging(key)))
                 for key, outs in todo.items()]
        self.progress.started(len(tasks))
        finished: set[str] = set()
        try:
            for task, result in self.executor.run(tasks):
                with signals_deferred():   # committed and recorded together, or not at all
                    self._finish(task, result, todo[task.key])
                    finished.add(task.key)
                self.progress.simulated()
        finally:   # interrupted: a run that completed before its result came back is kept; no staging folder stays
            with signals_deferred():
                for task in tasks:
                    if task.key not in finished and _completed(Path(task.out_dir)):
                        self._finish(task, {}, todo[task.key])
                    shutil.rmtree(task.out_dir, ignore_errors=True)

    def _finish(self, task: Task, result: dict, outs: list[Outcome]) -> None:
        self.simulated += 1
        if "error" in result:
            for out in outs:
                out.status, out.error = "invalid", result["error"]
            return
        run_dir = self.cache.commit(task.key, Path(task.out_dir))
        self._fresh.add(task.key)
        summary = self.cache.summary(task.key)   # as written (NaN -> null), the same as a later cache hit
        for out in outs:
            out.summary, out.run_dir = summary, run_dir


def _completed(staged: Path) -> bool:
    """A staged run folder that ran to its end (DONE, status completed): a finished simulation worth keeping."""
    summary = try_summary(staged)
    return summary is not None and summary.get("status") == "completed"
