"""Values of the layer composition: a float for one step, an array over a run's decode context sums.

The composition (`sim.core.cost.roofline`) is one path for both: a decode-only shape's table prices a window of
context sums in one numpy pass, and a single step (or a shape that does not depend on the context) goes through
the same code with floats. Only the decode attention, and what is built on it, varies with the context; the rest
stays float. `larger`/`smaller`/`pick` are `max`/`min`/`if` for either kind: numpy's ufuncs on Python floats cost
about 20x a comparison, and give the same IEEE result, so floats take the comparison. Pricing single steps as
one-element arrays would remove the union at about 1 us per operation, on the path that prices shapes met for the
first time (a tenth to a quarter of a run's loop).
"""
from __future__ import annotations

from typing import Union

import numpy as np

PerContext = Union[float, np.ndarray]


def larger(a: PerContext, b: PerContext) -> PerContext:
    """max(a, b), elementwise when either is an array."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.maximum(a, b)
    return a if a >= b else b


def smaller(a: PerContext, b: PerContext) -> PerContext:
    """min(a, b), elementwise when either is an array."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.minimum(a, b)
    return a if a <= b else b


def pick(cond: object, a: PerContext, b: PerContext) -> PerContext:
    """a where cond else b, elementwise when cond is an array."""
    if isinstance(cond, np.ndarray):
        return np.where(cond, a, b)
    return a if cond else b
