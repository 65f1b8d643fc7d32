"""Long-lived simulation workers: local processes that import the simulator once and then run many configurations.

A fresh `python -m sim` spends seconds before its first event (imports, Hydra composition, building) and again
writing; a sweep of a thousand small configurations would pay that a thousand times. A `WorkerPool` starts
`workers` spawned processes (no state inherited from the caller) that import everything a run needs when they
start (`warm`), then take resolved configurations one after another: each task pays only for building its cluster,
simulating and writing its folder. The planner's `ProcessExecutor` (`sim/plan/executors.py`) and
`bench/sweep_speed.py` run on it, and so does the `workers` Hydra launcher of `python -m sim -m`
(`hydra_plugins/inferplan_launcher/`, `sim/sweep/launch.py`). Tasks are plain functions with picklable arguments;
results come back in completion order.
"""
from __future__ import annotations

import itertools
import multiprocessing
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, TypeVar

T = TypeVar("T")

# What a run imports (directly or through them): loaded once per worker at its start, so that no task pays for it.
WARM_MODULES = ("numpy", "pandas", "pyarrow.parquet", "simpy", "yaml", "omegaconf", "scenarios", "sim.api",
                "sim.results", "sim.simulate")


def warm(initializer: Callable[..., None] | None = None, *initargs: Any) -> None:
    """A worker's initializer: import what every run needs, then call the caller's `initializer(*initargs)`."""
    import importlib

    for name in WARM_MODULES:
        importlib.import_module(name)
    if initializer is not None:
        initializer(*initargs)


class WorkerPool:
    """`workers` spawned processes, warmed once, each running tasks until the pool closes. `initializer(*initargs)`
    runs in each worker after the imports (state every task of this pool shares, sent once per worker)."""

    def __init__(self, workers: int, initializer: Callable[..., None] | None = None, initargs: tuple = ()) -> None:
        self.workers = workers
        self._pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=warm,
                                         initargs=(initializer, *initargs))

    def run(self, fn: Callable[..., Any], items: Iterable[tuple[T, tuple]],
            in_flight: int | None = None) -> Iterator[tuple[T, Any]]:
        """Call `fn(*args)` for each `(tag, args)` in the workers; yield `(tag, result)` as each finishes. An
        exception in `fn` propagates here (a refused configuration is a result, not an exception: see callers).
        `in_flight` caps the tasks handed to the workers at once (default: all of them, queued); a caller that may
        stop early passes `workers`, so that no task is queued behind the running ones when it stops."""
        todo = iter(items)
        pending: dict[Future, T] = {}

        def submit(n: int | None) -> None:
            for tag, args in todo if n is None else itertools.islice(todo, n):
                pending[self._pool.submit(fn, *args)] = tag
        submit(in_flight)
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            if in_flight is not None:
                submit(len(done))
            for future in done:
                yield pending.pop(future), future.result()

    def pids(self) -> list[int]:
        """The worker processes' ids (started so far)."""
        return [p.pid for p in list(getattr(self._pool, "_processes", {}).values()) if p.pid is not None]

    def close(self, abort: bool = False) -> None:
        """Shut the workers down; `abort` ends the tasks still running (an interrupted plan or sweep)."""
        if abort:
            for proc in list(getattr(self._pool, "_processes", {}).values()):
                proc.terminate()
        self._pool.shutdown(wait=not abort, cancel_futures=True)
