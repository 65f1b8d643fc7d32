"""Traffic for the simulator: generators, real-trace loaders and transformations, all producing a `Workload`.

Read first: `workload.py` (the columnar `Workload` contract), `build.py` (`build_workload(traffic, seed)`, the
one entry point, and the `GENERATORS` registry), then `arrivals/` (arrival processes) and `loaders/` (traces).
`docs/scenarios.md` documents every config kind and key.
"""
from __future__ import annotations

from scenarios.build import GENERATORS, build_workload
from scenarios.loaders import LOADERS, load_trace, save_workload
from scenarios.workload import Request, Workload

__all__ = ["GENERATORS", "LOADERS", "Request", "Workload", "build_workload", "load_trace", "save_workload"]
