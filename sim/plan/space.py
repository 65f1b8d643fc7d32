"""The search space: `search.<key>=<choices>` arguments turned into dimensions, and dimensions into lines.

Choices use Hydra's sweep grammar: a list `[a,b]`, `a,b`, `choice(a,b)`, `range(1,9)` (1..8: the stop is excluded,
as in Hydra and Python), `range(2,17,2)`. A single value fixes the key for the whole search.

A **count** dimension is `scenario.pools.<pool>.instances` with integer choices; the planner bisects it (when the
pool's size is fixed, the SLO verdict is monotone in it). Every other dimension is a **choice**, enumerated.
A **line** is one combination of every dimension but the bisected count: the planner bisects along it.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from inferplan.errors import InputError

SEARCH_PREFIX = "search."
_COUNT_KEY = re.compile(r"^scenario\.pools\.([^.]+)\.instances$")


@dataclass(frozen=True)
class Dimension:
    """One searched key and its choices (typed `values`, and `texts` to write them back as overrides)."""

    key: str                  # as written after `search.`, e.g. `batching`, `scenario.pools.main.instances`
    values: tuple
    texts: tuple[str, ...]

    @property
    def pool(self) -> str | None:
        """The pool whose instance count this is, or None for a choice dimension."""
        m = _COUNT_KEY.match(self.key.lstrip("+"))
        ints = all(isinstance(v, int) and not isinstance(v, bool) for v in self.values)
        return m.group(1) if m and ints else None

    @property
    def is_count(self) -> bool:
        return self.pool is not None

    def override(self, index: int) -> str:
        return f"{self.key}={self.texts[index]}"

    def describe(self) -> dict:
        return {"key": self.key.lstrip("+"), "kind": "count" if self.is_count else "choice", "pool": self.pool,
                "values": list(self.values)}


def parse_dimension(arg: str) -> Dimension:
    """`search.<key>=<choices>` as a Dimension (counts sorted ascending, duplicates dropped)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    body = arg[len(SEARCH_PREFIX):]
    key, sep, rhs = body.partition("=")
    fix = "write search.<key>=[a,b], search.<key>=range(1,9) or search.<key>=a,b (docs/planning.md)"
    if not sep or not key or not rhs.strip():
        raise InputError("command line", arg, "a search dimension needs a key and choices", fix)
    rhs = rhs.strip()
    if rhs.startswith("[") and rhs.endswith("]"):
        if not rhs[1:-1].strip():
            raise InputError("command line", arg, "has no choices", fix)
        rhs = f"choice({rhs[1:-1]})"
    try:
        ov = OverridesParser.create().parse_override(f"{key}={rhs}")
    except HydraException as err:
        first = str(err).strip().splitlines()[0]
        raise InputError("command line", arg, f"cannot parse ({first})", fix) from None
    if ov.is_interval_sweep():
        raise InputError("command line", arg, "interval() is continuous; the planner needs discrete choices",
                         "use range(start,stop,step) or a list")
    if ov.is_delete():
        raise InputError("command line", arg, "a deletion (~key) cannot be searched", fix)
    if ov.is_sweep_override():
        values, texts = tuple(ov.sweep_iterator()), tuple(ov.sweep_string_iterator())
    else:
        values, texts = (ov.value(),), (ov.get_value_element_as_str(),)
    if not values:
        raise InputError("command line", arg, "has no choices", fix)
    dim = Dimension(key, values, texts)
    if dim.is_count:
        if any(v < 0 for v in values):
            raise InputError("command line", arg, "instance counts must be >= 0", "use e.g. range(1,9)")
        pairs = sorted(dict(zip(values, texts)).items())
        dim = Dimension(key, tuple(v for v, _ in pairs), tuple(t for _, t in pairs))
    return dim


@dataclass(frozen=True)
class Line:
    """A fixed choice for every dimension but `count` (the bisected one, or None when nothing is bisected)."""

    fixed: tuple[str, ...]    # overrides, in dimension order
    count: Dimension | None

    def overrides(self, index: int | None) -> tuple[str, ...]:
        return self.fixed if self.count is None else (*self.fixed, self.count.override(index))


@dataclass(frozen=True)
class SearchSpace:
    dimensions: tuple[Dimension, ...]

    @property
    def bisected(self) -> Dimension | None:
        """The count dimension with the most choices (the first such on ties), bisected along every line."""
        counts = [d for d in self.dimensions if d.is_count and len(d.values) > 1]
        return max(counts, key=lambda d: len(d.values)) if counts else None

    @property
    def size(self) -> int:
        n = 1
        for d in self.dimensions:
            n *= len(d.values)
        return n

    def lines(self) -> list[Line]:
        """Every combination of the other dimensions, in the order given (first dimension slowest)."""
        axis = self.bisected
        others = [d for d in self.dimensions if d is not axis]
        return [Line(tuple(d.override(i) for d, i in zip(others, idx)), axis)
                for idx in itertools.product(*(range(len(d.values)) for d in others))]

    def first_overrides(self) -> list[str]:
        """Each dimension at its first choice (for validating the base configuration)."""
        return [d.override(0) for d in self.dimensions]


def parse_space(args: list[str]) -> SearchSpace:
    dims = [parse_dimension(a) for a in args]
    keys = [d.key.lstrip("+") for d in dims]
    dup = next((k for k in keys if keys.count(k) > 1), None)
    if dup:
        raise InputError("command line", f"search.{dup}", "is searched twice", "give its choices once")
    return SearchSpace(tuple(dims))
