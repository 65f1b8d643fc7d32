"""Named, seeded random streams: one independent generator per subsystem.

`stream(seed, "arrivals")` and `stream(seed, "lengths")` never share state, so changing how one part draws its
numbers does not reshuffle the others. Names are hashed with BLAKE2 (stable across runs and Python versions,
unlike `hash()`).
"""
from __future__ import annotations

import hashlib

import numpy as np


def stream_key(name: str) -> int:
    """A stable 64-bit integer for a stream name."""
    return int.from_bytes(hashlib.blake2b(name.encode("utf-8"), digest_size=8).digest(), "little")


def stream(seed: int, name: str) -> np.random.Generator:
    """The generator for stream `name` under run seed `seed` (same inputs, same numbers)."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), stream_key(name)])))


class Streams:
    """The named streams of one part of a scenario: `streams("arrivals")` is `stream(seed, namespace + "arrivals")`.

    A part of a mix gets `Streams(seed, "<part name>/")`, so adding, removing or reordering other parts never
    changes its numbers; `child("sessions/")` nests a further namespace.
    """

    def __init__(self, seed: int, namespace: str = "") -> None:
        self.seed, self.namespace = int(seed), namespace

    def __call__(self, name: str) -> np.random.Generator:
        return stream(self.seed, self.namespace + name)

    def child(self, namespace: str) -> "Streams":
        return Streams(self.seed, self.namespace + namespace)
