"""Typed, validated access to one block of a config (a plain dict from a Hydra yaml): the traffic configs and a
pool's `deployment:` (sim/core/cost/deployment.py) read through it, so they refuse bad input in one form.

A `ConfigReader` wraps one mapping and its dotted location (`traffic.parts[1].lengths`). Each accessor checks the
type and range of one key and raises `InputError` naming the key and the fix; `finish()` then rejects any key that
no accessor asked for, listing the valid ones. Builders therefore read *every* key they accept unconditionally
(optional ones with a default), so the valid-key list is always complete.

    r = ConfigReader(cfg, file="traffic", where="traffic")
    rate = r.number("rate_per_s", positive=True)          # required
    cap = r.integer("num_requests", None, minimum=1)      # optional
    r.finish()
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from inferplan.errors import InputError, unknown_key
from scenarios.capacity import too_many

REQUIRED = object()  # sentinel: the key must be present


def is_mapping(x: Any) -> bool:
    return isinstance(x, Mapping)


def is_list(x: Any) -> bool:
    return isinstance(x, Sequence) and not isinstance(x, (str, bytes))


class ConfigReader:
    """Reads keys of one config mapping; `file` names the config for errors, `where` is the key path."""

    def __init__(self, cfg: Any, *, file: str = "traffic", where: str = "traffic") -> None:
        if not is_mapping(cfg):
            raise InputError(file, where, f"expected a mapping, got {type(cfg).__name__} {cfg!r}",
                             "write a block of `key: value` lines")
        self.cfg, self.file, self.where = cfg, file, where
        self._asked: list[str] = []

    # -- plumbing ---------------------------------------------------------------------------------------------
    def path(self, key: str) -> str:
        """Dotted location of `key` (for error messages and nested readers)."""
        return f"{self.where}.{key}" if self.where else key

    def error(self, key: str, problem: str, fix: str) -> InputError:
        return InputError(self.file, self.path(key), problem, fix)

    def _get(self, key: str, default: Any) -> Any:
        if key not in self._asked:
            self._asked.append(key)
        if key in self.cfg and self.cfg[key] is not None:
            return self.cfg[key]
        if default is REQUIRED:
            raise self.error(key, "is missing", f"add `{key}:` to {self.where or 'the config'}")
        return default

    def has(self, key: str) -> bool:
        """Whether `key` is present (marks it as a valid key)."""
        if key not in self._asked:
            self._asked.append(key)
        return key in self.cfg and self.cfg[key] is not None

    def nested(self, key: str, default: Any = REQUIRED) -> "ConfigReader | None":
        """A reader for the mapping under `key` (None when optional and absent)."""
        value = self._get(key, default)
        if value is None:
            return None
        return ConfigReader(value, file=self.file, where=self.path(key))

    def finish(self) -> None:
        """Raise on keys that no accessor asked for, listing the valid keys."""
        unknown = [k for k in self.cfg if k not in self._asked]
        if unknown:
            raise unknown_key(self.file, self.path(str(unknown[0])), self._asked)

    # -- typed accessors --------------------------------------------------------------------------------------
    def number(self, key: str, default: Any = REQUIRED, *, positive: bool = False, minimum: float | None = None,
               maximum: float | None = None, below: float | None = None) -> float:
        """A finite float; `positive` means > 0, `minimum`/`maximum` are inclusive bounds, `below` exclusive."""
        value = self._get(key, default)
        if value is None:
            return None  # type: ignore[return-value]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.error(key, f"must be a finite number, got {value!r}", f"write a number, e.g. `{key}: 1.0`")
        value = float(value)
        if positive and value <= 0:
            raise self.error(key, f"must be > 0, got {value:g}", "use a positive value")
        if minimum is not None and value < minimum:
            raise self.error(key, f"must be >= {minimum:g}, got {value:g}", f"use a value >= {minimum:g}")
        if maximum is not None and value > maximum:
            raise self.error(key, f"must be <= {maximum:g}, got {value:g}", f"use a value <= {maximum:g}")
        if below is not None and value >= below:
            raise self.error(key, f"must be < {below:g}, got {value:g}", f"use a value < {below:g}")
        return value

    def optional_number(self, key: str, *, minimum: float | None = None, maximum: float | None = None) -> float | None:
        """`number` for a key whose absence means "not set" (None), typed so for compiled callers."""
        if not self.has(key):
            return None
        return self.number(key, minimum=minimum, maximum=maximum)

    def optional_integer(self, key: str, *, minimum: int | None = None) -> int | None:
        """`integer` for a key whose absence means "not set" (None)."""
        if not self.has(key):
            return None
        return self.integer(key, minimum=minimum)

    def integer(self, key: str, default: Any = REQUIRED, *, minimum: int | None = None) -> int:
        """An int (a float with an integral value is accepted); `minimum` is inclusive."""
        value = self._get(key, default)
        if value is None:
            return None  # type: ignore[return-value]
        ok = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        if isinstance(value, bool) or not ok:
            raise self.error(key, f"must be an integer, got {value!r}", f"write a whole number, e.g. `{key}: 10`")
        value = int(value)
        if minimum is not None and value < minimum:
            raise self.error(key, f"must be >= {minimum}, got {value}", f"use a value >= {minimum}")
        return value

    def request_count(self, key: str, default: Any = REQUIRED) -> int:
        """A count of requests (an integer >= 1) that this machine's memory can hold (scenarios/capacity.py)."""
        value = self.integer(key, default, minimum=1)
        if value is not None:
            self.check_request_count(key, value)
        return value

    def check_request_count(self, key: str, count: float) -> None:
        """Refuse `count` requests (set or implied by `key`) before anything is allocated when memory cannot hold
        them."""
        why = too_many(count)
        if why is not None:
            raise self.error(key, why, "simulate fewer requests (a shorter window, a lower rate), or split the run "
                                       "into windows")

    def string(self, key: str, default: Any = REQUIRED, *, choices: Sequence[str] | None = None) -> str:
        value = self._get(key, default)
        if value is None:
            return None  # type: ignore[return-value]
        if not isinstance(value, str):
            raise self.error(key, f"must be a string, got {value!r}", f"write text, e.g. `{key}: name`")
        if choices is not None and value not in choices:
            raise self.error(key, f"unknown value {value!r}", f"use one of: {', '.join(choices)}")
        return value

    def boolean(self, key: str, default: Any = REQUIRED) -> bool:
        value = self._get(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, got {value!r}", f"write `{key}: true` or `false`")
        return value

    def number_list(self, key: str, default: Any = REQUIRED, *, min_len: int = 1, minimum: float | None = None,
                    maximum: float | None = None, positive: bool = False) -> list[float]:
        """A list of finite floats with at least `min_len` entries."""
        value = self._get(key, default)
        if value is None:
            return None  # type: ignore[return-value]
        if not is_list(value) or len(value) < min_len:
            raise self.error(key, f"must be a list of at least {min_len} numbers, got {value!r}",
                             f"write e.g. `{key}: [1.0, 2.0]`")
        out = []
        for i, x in enumerate(value):
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
                raise self.error(f"{key}[{i}]", f"must be a finite number, got {x!r}", "write a number")
            if positive and x <= 0:
                raise self.error(f"{key}[{i}]", f"must be > 0, got {x:g}", "use a positive value")
            if minimum is not None and x < minimum:
                raise self.error(f"{key}[{i}]", f"must be >= {minimum:g}, got {x:g}", f"use a value >= {minimum:g}")
            if maximum is not None and x > maximum:
                raise self.error(f"{key}[{i}]", f"must be <= {maximum:g}, got {x:g}", f"use a value <= {maximum:g}")
            out.append(float(x))
        return out

    def mapping_list(self, key: str, default: Any = REQUIRED) -> list["ConfigReader"]:
        """Readers for a list of mappings (e.g. `parts`, `transforms`, `flash_sales`)."""
        value = self._get(key, default)
        if value is None:
            return []
        if not is_list(value):
            raise self.error(key, f"must be a list, got {value!r}", f"write `{key}:` followed by `- kind: ...` items")
        return [ConfigReader(item, file=self.file, where=self.path(f"{key}[{i}]")) for i, item in enumerate(value)]

    def raw(self, key: str, default: Any = REQUIRED) -> Any:
        """The value as written (the caller validates it)."""
        return self._get(key, default)


def kind_of(reader: ConfigReader, registry: Mapping[str, Any], default: str | None = None) -> str:
    """Read `kind` and check it is a registry key, listing the valid kinds otherwise."""
    kind = reader.raw("kind", REQUIRED if default is None else default)
    if not isinstance(kind, str) or kind not in registry:
        raise reader.error("kind", f"unknown kind {kind!r}", f"use one of: {', '.join(registry)}")
    return kind
