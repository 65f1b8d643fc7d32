"""Transformations: pure functions Workload → Workload (and the `transforms:` config list that applies them).

Kinds (`TRANSFORMS`) and keys:

- `window`: `start_s`, optional `end_s`, optional `rebase` (default true: times become relative to `start_s`).
  Keeps `start_s <= arrival_s < end_s`. Exact.
- `scale_rate`: `factor` > 0, optional `hashes` (`remap` default | `keep`). < 1 thins (each session, or each
  request outside sessions, kept with probability `factor`); > 1 superposes ⌊factor⌋ copies shifted circularly by
  random offsets within the workload's span, plus one copy thinned to the fractional part. Copies get fresh session
  ids and, with `remap`, fresh prefix hashes: the copies are other users, so their private blocks must not hit the
  original's cache entries. A hash cannot tell a private block from a shared system prompt, so `remap` slightly
  under-counts cross-copy sharing and `keep` over-counts it (a copy then hits everything its original cached).
- `scale_time`: `factor` > 0; every arrival time is multiplied by it (0.5 compresses an hour into 30 minutes
  and doubles the rate). Exact.
- `clip_lengths`: `max_prompt_tokens` and/or `max_output_tokens`; prefix hashes are cut to the clipped prompt.
- `assign_classes`: `by` (`mix` default, or `by_length`) plus that classes kind's keys (see
  `classes_from_config`).
- `limit`: `num_requests`, keeps the first N by arrival.

Random transforms draw from the stream `transforms/<index>/<kind>` of the part they belong to.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from scenarios.config_reader import ConfigReader, is_mapping, kind_of
from scenarios.hashing import mix64
from scenarios.rng import Streams
from scenarios.workload import Workload


def _replace(wl: Workload, **changes) -> Workload:
    out = dataclasses.replace(wl, **changes)
    out.validate()
    return out


def window_of(wl: Workload) -> tuple[float, float]:
    """`(origin_s, span_s)` of the workload's window: `[0, metadata["duration_s"])` when a generator set it, else
    from the first arrival over the arrival range plus one mean gap (so copies of a trace tile without its last
    request landing on its first)."""
    if wl.metadata.get("duration_s"):
        return 0.0, float(wl.metadata["duration_s"])
    n = len(wl)
    first = float(wl.arrival_s[0]) if n else 0.0
    r = float(wl.arrival_s[-1]) - first if n else 0.0
    return first, (r + r / (n - 1) if r > 0 else 1.0)


def _groups(wl: Workload) -> tuple[np.ndarray, int]:
    """Group index per row: one per session, one per request outside sessions; and the group count."""
    key = np.where(wl.session_id >= 0, wl.session_id, -1 - np.arange(len(wl)))
    _, group = np.unique(key, return_inverse=True)
    return group, int(group.max()) + 1 if len(wl) else 0


def time_window(wl: Workload, start_s: float, end_s: float | None = None, *, rebase: bool = True) -> Workload:
    """Requests with `start_s <= arrival_s < end_s`, shifted to start at 0 when `rebase`."""
    end = np.inf if end_s is None else end_s
    out = wl.select((wl.arrival_s >= start_s) & (wl.arrival_s < end))
    meta = dict(out.metadata)
    meta.pop("duration_s", None)
    if end_s is not None and rebase:
        meta["duration_s"] = float(end_s - start_s)
    return _replace(out, arrival_s=out.arrival_s - start_s if rebase else out.arrival_s, metadata=meta)


def scale_time(wl: Workload, factor: float) -> Workload:
    """Arrival times × `factor` (< 1 compresses, > 1 stretches); lengths unchanged."""
    meta = dict(wl.metadata)
    if meta.get("duration_s"):
        meta["duration_s"] = float(meta["duration_s"]) * factor
    return _replace(wl, arrival_s=wl.arrival_s * factor, metadata=meta)


def clip_lengths(wl: Workload, max_prompt_tokens: int | None = None, max_output_tokens: int | None = None) -> Workload:
    """Clip lengths to the maxima; a clipped prompt keeps at most ceil(prompt / block) prefix hashes."""
    prompt = wl.prompt_tokens if max_prompt_tokens is None else np.minimum(wl.prompt_tokens, max_prompt_tokens)
    output = wl.output_tokens if max_output_tokens is None else np.minimum(wl.output_tokens, max_output_tokens)
    hashes = wl.prefix_hashes
    if hashes is not None and max_prompt_tokens is not None:
        keep = (-(-prompt // wl.hash_block_tokens)).tolist()
        hashes = tuple(h[:k] if len(h) > k else h for h, k in zip(hashes, keep))
    return _replace(wl, prompt_tokens=prompt, output_tokens=output, prefix_hashes=hashes)


def limit(wl: Workload, num_requests: int) -> Workload:
    """The first `num_requests` requests by arrival."""
    return wl if len(wl) <= num_requests else wl.select(slice(0, num_requests))


def _copy(wl: Workload, rows: np.ndarray, offset_s: float, k: int, remap: bool) -> Workload:
    """Rows of `wl` shifted by `offset_s`, wrapped per group into the window, as copy number `k`."""
    part = wl.select(rows)
    group, _ = _groups(part)
    t0, span = window_of(wl)
    first = np.full(group.max(initial=-1) + 1, np.inf)
    np.minimum.at(first, group, part.arrival_s)
    wrap = np.where(first[group] + offset_s >= t0 + span, span, 0.0)
    sid = np.where(part.session_id >= 0, part.session_id + k * (int(wl.session_id.max(initial=-1)) + 1), -1)
    hashes = part.prefix_hashes
    if hashes is not None and remap and k > 0:
        salt = np.uint64(0x5EED0000 + k)
        hashes = tuple((mix64(h.view(np.uint64) ^ mix64(salt))).view(np.int64) for h in hashes)
    return Workload.from_columns(part.arrival_s + offset_s - wrap, part.prompt_tokens, part.output_tokens,
                                 request_class=part.request_class, class_names=part.class_names,
                                 priority=part.priority, session_id=sid, prefix_hashes=hashes,
                                 hash_block_tokens=part.hash_block_tokens, source=part.source,
                                 metadata=part.metadata)


def scale_rate(wl: Workload, factor: float, rng: np.random.Generator, *, remap_hashes: bool = True) -> Workload:
    """About `factor` × the requests over the same span (see module docstring); sessions stay whole."""
    from scenarios.superpose import superpose

    group, n_groups = _groups(wl)
    whole, frac = int(np.floor(factor)), factor - np.floor(factor)
    span = window_of(wl)[1]
    copies = [_copy(wl, np.arange(len(wl)), 0.0, 0, remap_hashes)] if whole >= 1 else []
    for k in range(1, whole):
        copies.append(_copy(wl, np.arange(len(wl)), float(rng.random() * span), k, remap_hashes))
    if frac > 0:
        keep = (rng.random(n_groups) < frac)[group]
        offset = float(rng.random() * span) if whole >= 1 else 0.0
        copies.append(_copy(wl, np.nonzero(keep)[0], offset, whole, remap_hashes))
    out = superpose(copies, source=wl.source) if len(copies) > 1 else copies[0]
    return _replace(out, source=wl.source, metadata={**wl.metadata, "rate_scale": factor})


def assign_classes(wl: Workload, class_index: np.ndarray, names: Sequence[str],
                   priority: Mapping[str, int] | None = None) -> Workload:
    """Set each row's class to `names[class_index[row]]`; rows of a class listed in `priority` get that priority."""
    prio = wl.priority.copy()
    for i, name in enumerate(names):
        if priority and name in priority:
            prio[class_index == i] = priority[name]
    return _replace(wl, request_class=np.asarray(class_index, dtype=np.int16), class_names=tuple(names), priority=prio)


def classes_by_weight(wl: Workload, rng: np.random.Generator, weights: Sequence[float]) -> np.ndarray:
    """A class index per row drawn with `weights`; all turns of a session share one draw."""
    group, n_groups = _groups(wl)
    p = np.asarray(weights, dtype=np.float64)
    return rng.choice(p.shape[0], size=n_groups, p=p / p.sum())[group]


def classes_by_length(wl: Workload, field: str, thresholds: Sequence[float]) -> np.ndarray:
    """Class i holds rows with `thresholds[i-1] <= wl.<field> < thresholds[i]` (increasing thresholds)."""
    return np.searchsorted(np.asarray(thresholds), getattr(wl, field), side="right")


# -- config ---------------------------------------------------------------------------------------------------
Transform = Callable[[Workload, np.random.Generator], Workload]


def classes_from_config(r: ConfigReader) -> Transform:
    """Parse a classes block (the `classes:` key, or an `assign_classes` transform).

    `kind: mix` — `weights: {name: weight}` (normalised; a session's turns share one draw); `kind: by_length` —
    `field` (`prompt_tokens` default, or `output_tokens`), `thresholds` (n−1 increasing token counts: class i
    holds lengths in [thresholds[i−1], thresholds[i])) and `names` (n classes). Both take an optional
    `priority: {name: int}` (classes not listed keep the request's priority).
    """
    kind = kind_of(r, {"mix": 0, "by_length": 0})
    prio = r.raw("priority", {})
    if not is_mapping(prio) or not all(isinstance(v, int) and not isinstance(v, bool) for v in prio.values()):
        raise r.error("priority", f"must map class names to integers, got {prio!r}", "write e.g. {chat: 2, batch: 0}")
    prio = {str(k): int(v) for k, v in prio.items()}
    if kind == "mix":
        weights = r.raw("weights")
        if not is_mapping(weights) or not weights or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in weights.values()) \
                or sum(weights.values()) <= 0:
            raise r.error("weights", f"must map class names to weights >= 0 with a positive sum, got {weights!r}",
                          "write e.g. {chat: 0.7, batch: 0.3}")
        names, w = [str(k) for k in weights], [float(v) for v in weights.values()]
        r.finish()
        return lambda wl, rng: assign_classes(wl, classes_by_weight(wl, rng, w), names, prio)
    field = r.string("field", "prompt_tokens", choices=["prompt_tokens", "output_tokens"])
    thresholds = r.number_list("thresholds", minimum=0.0)
    names = r.raw("names")
    if not isinstance(names, Sequence) or isinstance(names, str) or len(names) != len(thresholds) + 1 \
            or np.any(np.diff(thresholds) <= 0):
        raise r.error("names", f"needs len(thresholds) + 1 = {len(thresholds) + 1} names and increasing "
                      f"thresholds, got {names!r}", "list one more name than thresholds")
    names = [str(x) for x in names]
    r.finish()
    return lambda wl, rng: assign_classes(wl, classes_by_length(wl, field, thresholds), names, prio)


def _window(r: ConfigReader) -> Transform:
    start, end = r.number("start_s", minimum=0.0), r.number("end_s", None)
    rebase = r.boolean("rebase", True)
    r.finish()
    if end is not None and end <= start:
        raise r.error("end_s", f"({end:g}) must exceed start_s ({start:g})", "raise end_s")
    return lambda wl, rng: time_window(wl, start, end, rebase=rebase)


def _scale_rate(r: ConfigReader) -> Transform:
    factor = r.number("factor", positive=True)
    remap = r.string("hashes", "remap", choices=["remap", "keep"]) == "remap"
    r.finish()
    return lambda wl, rng: scale_rate(wl, factor, rng, remap_hashes=remap)


def _scale_time(r: ConfigReader) -> Transform:
    factor = r.number("factor", positive=True)
    r.finish()
    return lambda wl, rng: scale_time(wl, factor)


def _clip(r: ConfigReader) -> Transform:
    mp, mo = r.integer("max_prompt_tokens", None, minimum=1), r.integer("max_output_tokens", None, minimum=1)
    r.finish()
    if mp is None and mo is None:
        raise r.error("max_prompt_tokens", "neither max_prompt_tokens nor max_output_tokens is given", "give one")
    return lambda wl, rng: clip_lengths(wl, mp, mo)


def _limit(r: ConfigReader) -> Transform:
    n = r.integer("num_requests", minimum=1)
    r.finish()
    return lambda wl, rng: limit(wl, n)


TRANSFORMS = {"window": _window, "scale_rate": _scale_rate, "scale_time": _scale_time, "clip_lengths": _clip,
              "assign_classes": classes_from_config, "limit": _limit}


def transforms_from_config(readers: Sequence[ConfigReader]) -> list[tuple[str, Transform]]:
    """Parse a `transforms:` list (every entry validated before anything is generated)."""
    out = []
    for r in readers:
        kind = kind_of(r, TRANSFORMS)
        if kind == "assign_classes":  # `by` names the classes kind
            by = r.string("by", "mix", choices=["mix", "by_length"])
            inner = {k: v for k, v in r.cfg.items() if k not in ("kind", "by")}
            inner["kind"] = by
            out.append((kind, classes_from_config(ConfigReader(inner, file=r.file, where=r.where))))
        else:
            out.append((kind, TRANSFORMS[kind](r)))
    return out


def apply_transforms(wl: Workload, transforms: Sequence[tuple[str, Transform]], streams: Streams) -> Workload:
    """Apply parsed transforms in order; transform i draws from stream `transforms/<i>/<kind>`."""
    for i, (kind, fn) in enumerate(transforms):
        wl = fn(wl, streams(f"transforms/{i}/{kind}"))
    return wl
