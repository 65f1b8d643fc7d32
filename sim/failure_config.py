"""A pool's `failures:`, `pricing:` and `redundancy:` parsed and checked at load (called by sim/resolve.py), each
refusal one `InputError` line with the fix.

    failures: [{at_s: 120, instances: 1, repair_s: 300}]   # given times (`at_s: peak`, `repair_s: cold_start` too)
    failures: {mtbf_s: 86400, repair_s: 600}               # drawn per instance, exponential with mean mtbf_s
    pricing: spot                                          # on_demand | reserved | spot
    spot_interruption_mtbf_s: 7200                          # a spot pool's instances are interrupted at this rate

The records are in inferplan/config/fleet.py; the model is in sim/core/fleet/failures.py (failures) and
sim/core/fleet/billing.py (prices).
"""
from __future__ import annotations

from typing import Any

from inferplan.config.fleet import PRICINGS, FailureAt, FailurePlan, PoolPrice
from inferplan.errors import InputError
from scenarios.config_reader import REQUIRED, ConfigReader, is_list, is_mapping

REDUNDANCIES = ("none", "n+1")   # `redundancy:` of a pool, read by the planner (sim/plan/redundancy.py)
_FORMS = "write failures: [{at_s: 60, instances: 1, repair_s: 300}] or failures: {mtbf_s: 86400, repair_s: 600}"


def _seconds_or(r: ConfigReader, key: str, word: str, default: Any) -> tuple[float, bool]:
    """A number of seconds >= 0 under `key`, or the word `word` (returned as (0, True))."""
    value = r.raw(key, default)
    if value == word:
        return 0.0, True
    if isinstance(value, str):
        raise r.error(key, f"must be a number of seconds >= 0 or `{word}`, got {value!r}", f"e.g. `{key}: 60`")
    return r.number(key, default, minimum=0.0), False


def failure_plan(failures: Any, spot_mtbf_s: float | None, file: str, where: str) -> FailurePlan:
    """The pool's `FailurePlan` from its `failures:` (None: none) and, for a spot pool, its interruption rate."""
    spot = 0.0 if spot_mtbf_s is None else float(spot_mtbf_s)
    if failures is None or (is_list(failures) and not failures):
        return FailurePlan(spot_mtbf_s=spot)
    if is_mapping(failures):
        r = ConfigReader(failures, file=file, where=f"{where}.failures")
        mtbf_s = r.number("mtbf_s", positive=True)
        repair_s = r.number("repair_s", 0.0, minimum=0.0)
        r.finish()
        return FailurePlan(mtbf_s=mtbf_s, repair_s=repair_s, spot_mtbf_s=spot)
    if not is_list(failures):
        raise InputError(file, f"{where}.failures", f"must be a list of given failures or a rate, got {failures!r}",
                         _FORMS)
    given = []
    for r in ConfigReader({"failures": failures}, file=file, where=where).mapping_list("failures"):
        at_s, at_peak = _seconds_or(r, "at_s", "peak", REQUIRED)
        instances = r.integer("instances", 1, minimum=1)
        repair_s, cold = _seconds_or(r, "repair_s", "cold_start", 0.0)
        r.finish()
        given.append(FailureAt(at_s, instances, repair_s, at_peak, cold))
    return FailurePlan(given=tuple(given), spot_mtbf_s=spot)


def pool_price(pricing: str, reserved_discount: float | None, spot_discount: float | None,
               spot_mtbf_s: float | None, block: dict, file: str, where: str) -> PoolPrice:
    """The pool's `PoolPrice`: its `pricing:` kind, with the discount the pool states or else the scenario's
    `pricing:` block (conf/config.yaml: stated assumptions)."""
    if pricing not in PRICINGS:
        raise InputError(file, f"{where}.pricing", f"unknown pricing {pricing!r}", f"use one of: {', '.join(PRICINGS)}")
    defaults = ConfigReader(block or {}, file=file, where="pricing")
    fallback = {"reserved": defaults.optional_number("reserved_discount", minimum=0.0),
                "spot": defaults.optional_number("spot_discount", minimum=0.0)}
    defaults.finish()
    own = {"reserved": reserved_discount, "spot": spot_discount}
    for kind, value in [*own.items(), *fallback.items()]:
        if value is not None and not 0.0 <= value < 1.0:
            raise InputError(file, f"{where}.{kind}_discount", f"must be a fraction in [0, 1), got {value!r}",
                             "e.g. 0.65 for 65% off the on-demand price")
    if spot_mtbf_s is not None and (pricing != "spot" or not spot_mtbf_s > 0):
        why = "must be > 0" if pricing == "spot" else "applies to a spot pool only"
        raise InputError(file, f"{where}.spot_interruption_mtbf_s", f"{why}, got {spot_mtbf_s!r} (pricing "
                         f"{pricing})", "give seconds > 0 with pricing: spot, or drop it")
    if pricing == "on_demand":
        return PoolPrice()
    discount = own[pricing] if own[pricing] is not None else fallback[pricing]
    if discount is None:
        raise InputError(file, f"{where}.{pricing}_discount", f"is needed for pricing: {pricing}",
                         f"set scenario.pricing.{pricing}_discount or the pool's {pricing}_discount")
    return PoolPrice(pricing, float(discount))


def redundancy(value: str | None, file: str, where: str) -> str | None:
    """A pool's `redundancy:` (None: the planner's option decides)."""
    if value is not None and value not in REDUNDANCIES:
        raise InputError(file, f"{where}.redundancy", f"unknown redundancy {value!r}",
                         f"use one of: {', '.join(REDUNDANCIES)}")
    return value
