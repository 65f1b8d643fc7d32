"""The traffic contract between `scenarios/` and `sim/`: a columnar, time-sorted table of requests.

A `Workload` holds one entry per request in numpy arrays (so a million-request day costs tens of MB, not a
million Python objects). Generators and trace loaders produce it; the simulator reads it row by row as arrivals.
Units: seconds and tokens, converted once in the loaders.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

_MAX_TOKENS = np.iinfo(np.int32).max  # (token counts are stored as int32)


@dataclass(frozen=True)
class Request:
    """One request as the simulator sees it on arrival.

    `prefix_hashes` are the hashes of the prompt's full KV blocks of `hash_block_tokens` tokens each, in order
    (Mooncake's `hash_ids`, or synthetic ones from multi-turn sessions); equal hashes mean equal prefixes.
    """

    request_id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    request_class: str = "default"
    priority: int = 0
    session_id: int = -1
    prefix_hashes: tuple[int, ...] = ()


@dataclass(frozen=True)
class Workload:
    """Requests as columns, sorted by `arrival_s` (ties keep their order).

    Guarantees (checked by `validate()`): all arrays have one length; `arrival_s` is finite, ≥ 0 and
    non-decreasing; `prompt_tokens` ≥ 1; `output_tokens` ≥ 1; `request_class` indexes `class_names`.
    """

    arrival_s: np.ndarray  # [R] float64, seconds from the start of the simulated window
    prompt_tokens: np.ndarray  # [R] int32 (from_columns; 4 bytes a request fewer than int64 at millions of rows)
    output_tokens: np.ndarray  # [R] int32
    request_class: np.ndarray  # [R] int16, index into class_names
    priority: np.ndarray  # [R] int16, higher is more urgent
    session_id: np.ndarray  # [R] int64, -1 when the request belongs to no session
    # (from_columns stores a column left at its default as a read-only broadcast of the one value: copy before
    # writing into it)
    class_names: tuple[str, ...] = ("default",)
    prefix_hashes: tuple[np.ndarray, ...] | None = None  # per request: int64 block hashes of its prompt
    hash_block_tokens: int = 512
    source: str = "synthetic"  # provenance: generator name and parameters, or trace path
    metadata: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.arrival_s.shape[0])

    @classmethod
    def from_columns(
        cls,
        arrival_s,
        prompt_tokens,
        output_tokens,
        *,
        request_class=None,
        class_names: tuple[str, ...] = ("default",),
        priority=None,
        session_id=None,
        prefix_hashes=None,
        hash_block_tokens: int = 512,
        source: str = "synthetic",
        metadata: dict | None = None,
    ) -> "Workload":
        """Build a workload from array-likes, filling optional columns with defaults; sorts by arrival (stable).
        Raises `ValueError` for a token count beyond int32."""
        arrival = np.asarray(arrival_s, dtype=np.float64)
        n = arrival.shape[0]
        order = np.argsort(arrival, kind="stable")
        def col(x, dtype, default):
            if x is None:  # (one value for every row: a read-only view of it, no memory per request)
                return np.broadcast_to(np.array(default, dtype=dtype), (n,))
            return np.asarray(x, dtype=dtype)[order]

        def tokens(x, name):
            a = np.asarray(x)
            if a.size and a.dtype.kind in "iuf" and a.max() > _MAX_TOKENS:
                raise ValueError(f"{name} above {_MAX_TOKENS:,} tokens")
            return a.astype(np.int32)[order]
        hashes = None
        if prefix_hashes is not None:
            hashes = tuple(np.asarray(prefix_hashes[i], dtype=np.int64) for i in order)
        wl = cls(
            arrival_s=arrival[order],
            prompt_tokens=tokens(prompt_tokens, "prompt_tokens"),
            output_tokens=tokens(output_tokens, "output_tokens"),
            request_class=col(request_class, np.int16, 0),
            priority=col(priority, np.int16, 0),
            session_id=col(session_id, np.int64, -1),
            class_names=tuple(class_names),
            prefix_hashes=hashes,
            hash_block_tokens=int(hash_block_tokens),
            source=source,
            metadata=dict(metadata or {}),
        )
        wl.validate()
        return wl

    def validate(self) -> None:
        """Raise `ValueError` naming the first broken guarantee (loaders turn it into an `InputError`)."""
        n = len(self)
        for name in ("prompt_tokens", "output_tokens", "request_class", "priority", "session_id"):
            if getattr(self, name).shape != (n,):
                raise ValueError(f"column {name} has shape {getattr(self, name).shape}, expected ({n},)")
        if n and not np.all(np.isfinite(self.arrival_s)):
            raise ValueError("arrival_s has non-finite values")
        if n and self.arrival_s[0] < 0:
            raise ValueError("arrival_s has negative values")
        if n > 1 and np.any(np.diff(self.arrival_s) < 0):
            raise ValueError("arrival_s is not sorted")
        if n and self.prompt_tokens.min() < 1:
            raise ValueError("prompt_tokens must be >= 1")
        if n and self.output_tokens.min() < 1:
            raise ValueError("output_tokens must be >= 1")
        if n and (self.request_class.min() < 0 or self.request_class.max() >= len(self.class_names)):
            raise ValueError("request_class does not index class_names")
        if self.prefix_hashes is not None and len(self.prefix_hashes) != n:
            raise ValueError("prefix_hashes must have one entry per request")

    def request(self, i: int) -> Request:
        """Row `i` as a `Request` (ids are row indices, so they are stable for a given workload)."""
        return Request(
            request_id=i,
            arrival_s=float(self.arrival_s[i]),
            prompt_tokens=int(self.prompt_tokens[i]),
            output_tokens=int(self.output_tokens[i]),
            request_class=self.class_names[int(self.request_class[i])],
            priority=int(self.priority[i]),
            session_id=int(self.session_id[i]),
            prefix_hashes=() if self.prefix_hashes is None else tuple(int(h) for h in self.prefix_hashes[i]),
        )

    def __iter__(self) -> Iterator[Request]:
        return (self.request(i) for i in range(len(self)))

    def select(self, mask_or_index) -> "Workload":
        """A sub-workload of the given rows (mask or sorted index), keeping order and provenance."""
        idx = np.arange(len(self))[mask_or_index]
        hashes = None if self.prefix_hashes is None else tuple(self.prefix_hashes[i] for i in idx)
        return Workload(
            arrival_s=self.arrival_s[idx], prompt_tokens=self.prompt_tokens[idx],
            output_tokens=self.output_tokens[idx], request_class=self.request_class[idx],
            priority=self.priority[idx], session_id=self.session_id[idx], class_names=self.class_names,
            prefix_hashes=hashes, hash_block_tokens=self.hash_block_tokens, source=self.source,
            metadata=dict(self.metadata),
        )
