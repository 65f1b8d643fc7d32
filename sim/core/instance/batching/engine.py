"""The engine presets' scheduler (`EnginePreset.batching`, sim/core/instance/engine.py) is the one `Scheduler`
(scheduler.py), built with all the preset's rules; this is its name there."""
from __future__ import annotations

from sim.core.instance.batching.scheduler import Scheduler

EngineBatching = Scheduler

__all__ = ["EngineBatching"]
