"""Superposition: several workloads as one (a mix of class streams, or copies of a trace for rate scaling)."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scenarios.workload import Workload

_NO_HASHES = np.empty(0, dtype=np.int64)


def superpose(parts: Sequence[Workload], *, source: str = "mix") -> Workload:
    """Merge `parts` into one time-sorted workload (ties keep part order, then row order).

    Class names are united in order of first appearance; session ids are offset so sessions of different parts
    never share an id; parts without prefix hashes get empty ones when any part has them. Raises `ValueError`
    when parts with hashes disagree on `hash_block_tokens`.
    """
    if len(parts) == 1:
        return parts[0]
    names: list[str] = []
    for wl in parts:
        names += [c for c in wl.class_names if c not in names]
    block = {wl.hash_block_tokens for wl in parts if wl.prefix_hashes is not None}
    if len(block) > 1:
        raise ValueError(f"parts use different hash_block_tokens {sorted(block)}")
    any_hashes = bool(block)
    durations = [float(wl.metadata["duration_s"]) for wl in parts if wl.metadata.get("duration_s")]
    classes, sessions, hashes, next_session = [], [], [], 0
    for wl in parts:
        remap = np.array([names.index(c) for c in wl.class_names], dtype=np.int16)
        classes.append(remap[wl.request_class])
        sessions.append(np.where(wl.session_id >= 0, wl.session_id + next_session, -1))
        if len(wl) and wl.session_id.max() >= 0:
            next_session += int(wl.session_id.max()) + 1
        if any_hashes:
            hashes.extend(wl.prefix_hashes if wl.prefix_hashes is not None else [_NO_HASHES] * len(wl))
    return Workload.from_columns(
        np.concatenate([wl.arrival_s for wl in parts]),
        np.concatenate([wl.prompt_tokens for wl in parts]),
        np.concatenate([wl.output_tokens for wl in parts]),
        request_class=np.concatenate(classes), class_names=tuple(names),
        priority=np.concatenate([wl.priority for wl in parts]),
        session_id=np.concatenate(sessions), prefix_hashes=hashes if any_hashes else None,
        hash_block_tokens=block.pop() if block else parts[0].hash_block_tokens, source=source,
        metadata={"parts": [wl.source for wl in parts], **({"duration_s": max(durations)} if durations else {})},
    )
