"""Confidence: the simulator's error band applied to every latency the planner compares with an SLO.

The band comes from the validation matrix (`sim/validate/data/silicon_error_bands.json`, written by
`python -m sim.validate.silicon.bands`): per partition engine x hardware class x model family, quantiles of
measured / simulated median latency. A latency at confidence c is the point estimate x the c-quantile of the
nearest partition of the pool that serves it. Nearest, in this order (the first with rows for the metric):
exact (engine/class/family) -> same engine and hardware class -> same engine -> same hardware class and family ->
same hardware class -> all rows. The hardware-class levels come after the engine levels because the matrix's
error is mostly the engine's (its front-end time and scheduler), and serve the `generic` engine, which the matrix
has no rows for.

A factor below 1 (the simulator over-predicted on that partition) is applied as 1: a band never turns a miss into
a pass. The matrix compares medians of closed-loop runs and the plan compares P99s of open-loop traffic, so a
factor below 1 would credit the simulator with pessimism on a tail it was never measured on; the raw factor is
kept in plan.json beside the applied one.

A request class served by several pools (a placement route such as `[l40s_int4, h200_fp8]`) takes the largest
factor among them: its P99 is the fleet's, and the slowest-biased pool bounds it.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

from inferplan.errors import InputError
from sim.validate.silicon.bands import ANY, OUT_PATH, engine_of_preset, hardware_class, key, model_family

BANDS_PATH = OUT_PATH
LEVELS = ("exact", "engine+hardware class", "engine", "hardware class+family", "hardware class", "all")
METRIC_OF_CHECK = {"ttft_p99": "ttft", "tpot_p99": "tpot"}


@functools.cache
def load_bands(path: str = str(BANDS_PATH)) -> dict:
    p = Path(path)
    if not p.is_file():
        raise InputError(p, "", "the error-band file is missing",
                         "write it: python -m sim.validate.silicon.bands <matrix dir>")
    return json.loads(p.read_text())


def parse_confidence(value) -> float | None:
    """The `confidence=` option: None for the point estimate (`0`, `none`, `false`), else a level the band file
    stores (0.5, 0.8, 0.9, 0.95)."""
    if value is None or value is False or str(value).strip().lower() in ("0", "0.0", "none", "false", "off"):
        return None
    levels = load_bands()["quantiles"]
    try:
        c = float(value)
    except (TypeError, ValueError):
        c = -1.0
    if f"{c:g}" not in levels:
        raise InputError("command line", "confidence", f"unknown level {value!r}",
                         f"use one of {', '.join(levels)}, or confidence=0 for the point estimate")
    return c


@dataclass(frozen=True)
class Band:
    """The factor a latency is multiplied by at the plan's confidence, and where it comes from."""

    pool: str
    wanted: str          # the pool's own partition key
    partition: str       # the key used (nearest with rows)
    level: str           # one of LEVELS
    rows: int
    factor_raw: float    # the c-quantile of measured / simulated
    factor: float        # max(1, factor_raw): applied

    def to_json(self) -> dict:
        return {"pool": self.pool, "wanted": self.wanted, "partition": self.partition, "level": self.level,
                "rows": self.rows, "factor_raw": self.factor_raw, "factor": self.factor}


def candidates(engine: str, hw_class: str, family: str) -> list[tuple[str, str]]:
    """(level, key) in the fallback order."""
    keys = (key(engine, hw_class, family), key(engine, hw_class, ANY), key(engine, ANY, ANY),
            key(ANY, hw_class, family), key(ANY, hw_class, ANY), key(ANY, ANY, ANY))
    return list(zip(LEVELS, keys))


def lookup(partitions: dict, engine: str, hw_class: str, family: str, metric: str, confidence: float,
           pool: str = "") -> Band:
    """The nearest partition with rows for `metric` and its factor at `confidence`."""
    q = f"{confidence:g}"
    for level, k in candidates(engine, hw_class, family):
        entry = (partitions.get(k) or {}).get(metric)
        if entry and q in entry["quantiles"]:
            raw = float(entry["quantiles"][q])
            return Band(pool, key(engine, hw_class, family), k, level, int(entry["rows"]), raw, max(1.0, raw))
    raise InputError(BANDS_PATH, "partitions", f"no {ANY}/{ANY}/{ANY} partition for {metric}",
                     "re-write it: python -m sim.validate.silicon.bands <matrix dir>")


def pool_partition(config: dict, pool: str) -> tuple[str, str, str]:
    """(engine, hardware class, model family) of a pool of a resolved config."""
    spec = config["scenario"]["pools"][pool]
    engine = spec.get("engine") or config.get("engine") or {"name": "generic"}
    preset = engine if isinstance(engine, str) else str(engine.get("name", "generic"))
    return engine_of_preset(preset), hardware_class(str(spec["hardware"])), model_family(str(spec["model"]))


def class_pools(config: dict, request_class: str) -> list[str]:
    """The pools a class can be served by: its placement route, else the placement's default, else every pool."""
    pools = list(config["scenario"]["pools"])
    placement = config["scenario"].get("placement") or {}
    route = (placement.get("routes") or {}).get(request_class) or placement.get("default") or pools
    return [p for p in route if p in pools] or pools


class Bands:
    """Band factors of one plan: `for_check(config, class, check name)` -> Band or None (no band on that check)."""

    def __init__(self, confidence: float, partitions: dict) -> None:
        self.confidence, self.partitions = confidence, partitions

    @classmethod
    def load(cls, confidence: float | None) -> Bands | None:
        return None if confidence is None else cls(confidence, load_bands()["partitions"])

    def for_check(self, config: dict, request_class: str, check: str) -> Band | None:
        metric = METRIC_OF_CHECK.get(check)
        if metric is None or not config:
            return None
        pools = list(config["scenario"]["pools"]) if request_class == "*" else class_pools(config, request_class)
        found = [lookup(self.partitions, *pool_partition(config, p), metric, self.confidence, p) for p in pools]
        return max(found, key=lambda b: (b.factor, b.factor_raw))
