"""The `workers` launcher: Hydra sets it up for a multirun and hands it each batch of job overrides;
`sim.sweep.launch.Launch` does the work (imported only then: Hydra imports every module of `hydra_plugins` whenever
it starts)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class WorkersLauncher(Launcher):
    """Sweep jobs on `sim.workers.WorkerPool`: `workers` spawned processes (every core when None)."""

    def __init__(self, workers: Optional[int] = None) -> None:
        self.workers = workers
        self._launch: Any = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from sim.sweep.launch import Launch

        self._launch = Launch(hydra_context, config, task_function, self.workers)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        assert self._launch is not None, "setup() first"
        return self._launch.launch(job_overrides, initial_job_idx)
