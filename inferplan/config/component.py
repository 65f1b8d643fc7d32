"""`Component`: one registered extension (a batching policy, router, autoscaler or placement) as
configured, in the one typed form the configuration layer hands the simulator core.

`sim/resolve.py` builds each one at load from its yaml (registry key + keyword parameters) and checks it by
constructing the component once, so that an unknown key or an out-of-range value is an `InputError` before a run
starts; the core then only reads `name` and calls `kwargs()` for each construction. Frozen: the parameters are a
tuple of (key, value) pairs, so no part of a run can change another's configuration.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Component:
    """A registry key and its keyword parameters (without `name`), in the yaml's order."""

    name: str
    params: tuple[tuple[str, object], ...] = ()

    @classmethod
    def of(cls, name: str, params: Mapping[str, object] | None = None) -> Component:
        """Refuses (TypeError) a plain dict or list value: a block of the yaml is parsed into typed frozen
        records at load (sim/resolve.py `typed_params`), so no part of a run holds a mutable block."""
        pairs = tuple((str(k), v) for k, v in (params or {}).items() if k != "name")
        for key, value in pairs:
            if isinstance(value, (dict, list, set)):
                raise TypeError(f"{name}: parameter {key!r} is a plain {type(value).__name__}: parse it into a "
                                "typed record at load")
        return cls(str(name), pairs)

    def kwargs(self) -> dict[str, Any]:
        """A fresh keyword-argument mapping for one construction (each policy's constructor types its own
        parameters; they were checked against it at load)."""
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
