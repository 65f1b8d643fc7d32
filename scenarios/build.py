"""`build_workload(traffic, seed)`: the one call the simulator makes, from a traffic config to a `Workload`.

`traffic` is a plain mapping (a Hydra yaml block). Its `kind` picks a builder from `GENERATORS`; every kind also
takes the common keys:

- `request_class` (default `default`) and `priority` (int, default 0): set on every request of this traffic;
- `classes`: re-assign classes by weights or by length thresholds (see `transforms.classes_from_config`);
- `transforms`: a list of transformations applied in order (see `transforms.py`);
- `num_requests`: keep only the first N requests by arrival (applied last).

`kind: mix` superposes `parts` (each a traffic block with its own kind; each part is named by `name` or its
`request_class`, names must be unique, and each part draws from streams under `<name>/`, so editing one part
never changes another's requests). A mix takes `transforms` and `num_requests` but not the per-part keys.

Streams (see `rng.Streams`): `arrivals`, `lengths`, `lengths.prompt`, `lengths.output`, `lengths.user`,
`sessions.*`, `hashes`, `classes`, `transforms/<i>/<kind>`, prefixed by `<part name>/` inside a mix.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np

from scenarios import generators as G
from scenarios.config_reader import ConfigReader, kind_of
from scenarios.rng import Streams
from scenarios.superpose import superpose
from scenarios.transforms import apply_transforms, classes_from_config, limit, transforms_from_config
from scenarios.workload import Workload

Plan = Callable[[Streams], Workload]


def _mix(r: ConfigReader, kind: str) -> Plan:
    """Keys: `parts` (list of traffic blocks, at least one)."""
    parts, names = [], []
    for p in r.mapping_list("parts"):
        name = p.cfg.get("name") or p.cfg.get("request_class")
        if not isinstance(name, str) or not name:
            raise p.error("name", "a mix part needs a `name` or a `request_class`", "add `request_class: <class>`")
        if name in names:
            raise p.error("name", f"{name!r} names two parts", "give each part a unique name or request_class")
        names.append(name)
        parts.append((name, parse_traffic(p, is_part=True)))
    if not parts:
        raise r.error("parts", "is empty", "list at least one traffic block under parts")

    def make(streams: Streams) -> Workload:
        try:
            return superpose([plan(streams.child(f"{name}/")) for name, plan in parts], source="mix")
        except ValueError as err:
            raise r.error("parts", str(err), "use one hash_block_tokens across parts") from None
    return make


GENERATORS: dict[str, Callable[[ConfigReader, str], Plan]] = {
    "poisson": G.arrival_traffic,
    "gamma": G.arrival_traffic,
    "mmpp": G.arrival_traffic,
    "daily": G.arrival_traffic,
    "flash_sale": G.arrival_traffic,
    "client_windows": G.arrival_traffic,
    "sessions": G.sessions_traffic,
    "servegen": G.servegen_traffic,
    "trace": G.trace_traffic,
    "closed_loop": G.closed_loop_traffic,
    "mix": _mix,
}


def _set_class(wl: Workload, request_class: str | None, priority: int | None) -> Workload:
    changes = {}
    if request_class is not None:
        changes.update(request_class=np.zeros(len(wl), dtype=np.int16), class_names=(request_class,))
    if priority is not None:
        changes.update(priority=np.full(len(wl), priority, dtype=np.int16))
    return dataclasses.replace(wl, **changes) if changes else wl


def parse_traffic(r: ConfigReader, *, is_part: bool = False) -> Plan:
    """Validate a traffic block (its kind's keys and the common keys) and return its plan."""
    kind = kind_of(r, GENERATORS)
    if is_part:
        r.string("name", None)
    if kind == "mix":
        request_class = priority = classes = None
    else:
        request_class, priority = r.string("request_class", None), r.integer("priority", None)
        classes_cfg = r.nested("classes", None)
        classes = None if classes_cfg is None else classes_from_config(classes_cfg)
    transforms = transforms_from_config(r.mapping_list("transforms", None))
    cap = r.integer("num_requests", None, minimum=1)
    build = GENERATORS[kind](r, kind)
    r.finish()

    def plan(streams: Streams) -> Workload:
        wl = _set_class(build(streams), request_class, priority)
        if classes is not None:
            wl = classes(wl, streams("classes"))
        wl = apply_transforms(wl, transforms, streams)
        return wl if cap is None else limit(wl, cap)
    return plan


def build_workload(traffic: Mapping, seed: int, *, file: str = "traffic") -> Workload:
    """The workload `traffic` describes under run seed `seed` (same inputs, identical arrays).

    `file` names the config in error messages (e.g. `conf/scenario/ecommerce_peak.yaml`). Raises `InputError`
    for unknown kinds or keys (listing the valid ones), bad values and bad trace files.
    """
    plan = parse_traffic(ConfigReader(traffic, file=file, where="traffic"))
    wl = plan(Streams(seed))
    return dataclasses.replace(wl, metadata={**wl.metadata, "seed": int(seed)})
