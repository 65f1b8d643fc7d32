"""Where simulations run: in this process (`jobs=1`), in local worker processes, or on a Ray cluster.

Every executor takes `Task`s (a config hash, the resolved config, the folder to write into) and yields each
`(task, outcome)` as it finishes, in completion order. An outcome is `{"summary": dict}` or `{"error": str}` for a
configuration the simulator refuses (`InputError`: e.g. weights that do not fit); any other exception is a bug and
propagates.
"""
from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from inferplan.errors import InputError

RAY_FIX = "install the extra: pip install -e '.[ray]' (or drop ray_address= to run in local processes)"


@dataclass(frozen=True)
class Task:
    key: str                 # config hash
    config: dict             # resolved config (plain containers)
    overrides: tuple[str, ...]
    out_dir: str             # where the run folder goes (a cache staging folder)


def simulate_job(config: dict, overrides: tuple[str, ...], out_dir: str) -> dict:
    """Simulate one resolved config into `out_dir` (a run folder, with `.hydra/config.yaml` and `overrides.yaml`)."""
    from sim.api import run_composed

    hydra_dir = Path(out_dir) / ".hydra"
    hydra_dir.mkdir(parents=True, exist_ok=True)
    (hydra_dir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    (hydra_dir / "overrides.yaml").write_text(yaml.safe_dump(list(overrides)))
    try:
        summary, _ = run_composed(config, out_dir, progress=lambda fraction: None)
    except InputError as err:
        return {"error": str(err)}
    return {"summary": summary}


class InlineExecutor:
    """One simulation at a time, in this process (`jobs=1`: no start-up cost, easiest to debug)."""

    workers = 1
    backend = "inline"

    def run(self, tasks: list[Task]) -> Iterator[tuple[Task, dict]]:
        for task in tasks:
            yield task, simulate_job(task.config, task.overrides, task.out_dir)

    def close(self, abort: bool = False) -> None:
        pass


class ProcessExecutor:
    """`workers` long-lived local processes (`sim.workers.WorkerPool`: spawned, warmed once, reused per task)."""

    backend = "processes"

    def __init__(self, workers: int) -> None:
        from sim.workers import WorkerPool

        self.workers = workers
        self._pool = WorkerPool(workers)

    def run(self, tasks: list[Task]) -> Iterator[tuple[Task, dict]]:
        yield from self._pool.run(simulate_job, ((t, (t.config, t.overrides, t.out_dir)) for t in tasks))

    def close(self, abort: bool = False) -> None:
        """Shut the workers down; `abort` (an interrupted plan) ends the simulations still running."""
        self._pool.close(abort)


def _ray_job(config: dict, overrides: tuple[str, ...]) -> dict:
    """On a Ray worker: simulate into a local temporary folder and ship the folder's files back as bytes (the
    worker may be on another machine)."""
    with tempfile.TemporaryDirectory(prefix="inferplan-") as tmp:
        outcome = simulate_job(config, overrides, tmp)
        outcome["files"] = {p.relative_to(tmp).as_posix(): p.read_bytes()
                            for p in sorted(Path(tmp).rglob("*")) if p.is_file()}
    return outcome


def import_ray():
    try:
        import ray
    except ImportError:
        raise InputError("command line", "ray_address", "Ray is not installed", RAY_FIX) from None
    return ray


class RayExecutor:
    """Simulations as Ray tasks (one CPU each). `address="local"` starts a Ray instance here with `workers` CPUs;
    any other address (`auto`, `ray://<head>:10001`) joins that cluster, whose nodes need inferplan installed."""

    backend = "ray"

    def __init__(self, address: str, workers: int | None) -> None:
        ray = import_ray()
        self._ray = ray
        self._owned = not ray.is_initialized()   # a Ray this process already joined is used, and left up
        if self._owned:
            self._join(address, workers)
        self.workers = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._remote = ray.remote(num_cpus=1)(_ray_job)

    def _join(self, address: str, workers: int | None) -> None:
        local = address == "local"
        try:
            with warnings.catch_warnings():   # Ray's connection warnings would break the one-line error
                warnings.simplefilter("ignore")
                self._ray.init(address=None if local else address, num_cpus=workers if local else None,
                               include_dashboard=False, log_to_driver=False, configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise InputError("command line", "ray_address", f"cannot connect to Ray at {address!r} ({first})",
                             "start the cluster (ray start --head) or use ray_address=local") from None

    def run(self, tasks: list[Task]) -> Iterator[tuple[Task, dict]]:
        pending = {self._remote.remote(t.config, t.overrides): t for t in tasks}
        while pending:
            done, _ = self._ray.wait(list(pending), num_returns=1)
            for ref in done:
                task = pending.pop(ref)
                outcome = self._ray.get(ref)
                for rel, data in outcome.pop("files").items():
                    path = Path(task.out_dir) / rel
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(data)
                yield task, outcome

    def close(self, abort: bool = False) -> None:
        if self._owned:
            self._ray.shutdown()


def make_executor(ray_address: str | None, jobs: int | None):
    """The executor for the options: Ray when an address is given, else `jobs` local processes (inline for 1)."""
    if ray_address:
        return RayExecutor(ray_address, jobs)
    workers = jobs or os.cpu_count() or 1
    return InlineExecutor() if workers == 1 else ProcessExecutor(workers)
