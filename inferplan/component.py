"""`Component`: one registered extension (a batching policy, router, autoscaler, placement or engine preset) as
configured, in the one typed form the configuration layer hands the simulator core.

`sim/resolve.py` builds each one at load from its yaml (registry key + keyword parameters) and checks it by
constructing the component once, so that an unknown key or an out-of-range value is an `InputError` before a run
starts; the core then only reads `name` and calls `kwargs()` for each construction. Frozen: the parameters are a
tuple of (key, value) pairs, so no part of a run can change another's configuration.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Component:
    """A registry key and its keyword parameters (without `name`), in the yaml's order."""

    name: str
    params: tuple[tuple[str, object], ...] = ()

    @classmethod
    def of(cls, name: str, params: Mapping[str, object] | None = None) -> Component:
        return cls(str(name), tuple((str(k), v) for k, v in (params or {}).items() if k != "name"))

    def kwargs(self) -> dict[str, object]:
        """A fresh keyword-argument mapping for one construction."""
        return dict(self.params)

    def param(self, key: str, default: object = None) -> object:
        """One parameter's value (`default` when the yaml does not set it)."""
        for k, v in self.params:
            if k == key:
                return v
        return default

    def with_params(self, params: Mapping[str, object]) -> Component:
        """The same component with `params` set over its own (a pool's overrides of its group's)."""
        return Component.of(self.name, {**self.kwargs(), **params})
