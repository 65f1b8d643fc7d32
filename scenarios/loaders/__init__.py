"""Trace loaders: real and user traces into a `Workload` (seconds from the first request, tokens).

Read first: `checks.py` (how bad rows become one-line `InputError`s), `azure.py` (the simplest loader),
`generic.py` (inferplan's own CSV/Parquet columns, and `save_workload`). `LOADERS` maps a trace `format` to its
loader; `load_trace(format, path, **options)` is the one call the config layer uses.
"""
from __future__ import annotations

from pathlib import Path

from scenarios.loaders.azure import load_azure
from scenarios.loaders.burstgpt import load_burstgpt
from scenarios.loaders.generic import load_generic, save_workload
from scenarios.loaders.mooncake import load_mooncake
from scenarios.loaders.servegen import ServeGenLengths, ServeGenPool, load_servegen_pool
from scenarios.workload import Workload

LOADERS = {
    "azure": load_azure,
    "mooncake": load_mooncake,
    "burstgpt": load_burstgpt,
    "generic": load_generic,
}


def load_trace(format: str, path: str | Path, **options) -> Workload:
    """Load a per-request trace file of `format` (a `LOADERS` key) with loader-specific `options`."""
    return LOADERS[format](path, **options)


__all__ = ["LOADERS", "load_trace", "load_azure", "load_burstgpt", "load_generic", "load_mooncake",
           "load_servegen_pool", "save_workload", "ServeGenLengths", "ServeGenPool"]
