"""The engine presets' scheduler (`EnginePreset.batching`) is the one `Scheduler` (scheduler.py), built with all
of the preset's rules; `EngineBatching` is its name there."""
from __future__ import annotations

from sim.core.instance.batching.scheduler import Scheduler

EngineBatching = Scheduler

__all__ = ["EngineBatching"]
