"""Synthetic prefix-block hashes: equal hashes mean equal prompt prefixes, so a prefix cache can hit.

A prompt is cut into blocks of `hash_block_tokens` tokens; only *full* blocks get a hash (a partial tail is never
reusable). Block `j` of a token stream is named by `block_hash(salt, j)`, where the salt names the stream:

- a shared prefix (a system prompt), salt = `name_salt(shared_prefix_name)`: every request or session that names
  the same prefix gets the same hashes for the blocks that lie wholly inside it;
- a multi-turn session, salt = one per session: turn k+1 re-sends turn k's context, so its first blocks repeat;
- any other request, salt = one per request: its own blocks never match anything else.

Hashes are 64-bit (SplitMix64 finaliser), so collisions between streams are negligible (~n²/2⁶⁴).
"""
from __future__ import annotations

import numpy as np

from scenarios.rng import stream_key

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser on uint64 values (wrapping arithmetic), a bijection on 64-bit integers."""
    z = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def name_salt(name: str) -> np.uint64:
    """The salt of a named shared prefix (independent of the run seed, so parts can share it)."""
    return np.uint64(stream_key("prefix:" + name))


def block_hash(salt: np.ndarray, block_index: np.ndarray) -> np.ndarray:
    """int64 hash of block `block_index` of the stream with `salt` (arrays broadcast)."""
    salt = np.asarray(salt, dtype=np.uint64)
    j = np.asarray(block_index, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return mix64(mix64(salt) + j * _GOLDEN + np.uint64(1)).view(np.int64)


def stream_hashes(salts: np.ndarray, num_blocks: np.ndarray, shared_salt: np.uint64 | None = None,
                  shared_blocks: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Hashes of `num_blocks[i]` blocks for each stream `i`, flattened, plus each stream's start offset.

    The first `shared_blocks` blocks of every stream use `shared_salt` instead of the stream's own salt.
    Returns `(flat [sum(num_blocks)] int64, offsets [len(salts) + 1] int64)`.
    """
    num_blocks = np.asarray(num_blocks, dtype=np.int64)
    offsets = np.zeros(num_blocks.shape[0] + 1, dtype=np.int64)
    np.cumsum(num_blocks, out=offsets[1:])
    owner = np.repeat(np.arange(num_blocks.shape[0]), num_blocks)
    j = np.arange(offsets[-1], dtype=np.int64) - offsets[owner]
    salt = np.asarray(salts, dtype=np.uint64)[owner]
    if shared_salt is not None and shared_blocks > 0:
        salt = np.where(j < shared_blocks, shared_salt, salt)
    return block_hash(salt, j), offsets


def split_views(flat: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per-row views `flat[starts[i] : starts[i] + lengths[i]]` (no copies; the one Python loop per request)."""
    ends = (np.asarray(starts) + np.asarray(lengths)).tolist()
    return tuple(flat[s:e] for s, e in zip(np.asarray(starts).tolist(), ends))


def request_prefix_hashes(prompt_tokens: np.ndarray, salts: np.ndarray, hash_block_tokens: int,
                          shared_prefix_tokens: int = 0, shared_prefix_name: str = "") -> tuple[np.ndarray, ...]:
    """Hashes for independent requests whose first `shared_prefix_tokens` tokens are a named shared prefix.

    Each request gets `prompt_tokens // hash_block_tokens` hashes: shared ones for the blocks wholly inside
    `min(shared_prefix_tokens, prompt_tokens)`, its own (from `salts[i]`) for the rest.
    """
    num_blocks = np.asarray(prompt_tokens, dtype=np.int64) // hash_block_tokens
    shared = shared_prefix_tokens // hash_block_tokens
    flat, offsets = stream_hashes(salts, num_blocks, name_salt(shared_prefix_name) if shared else None, shared)
    return split_views(flat, offsets[:-1], num_blocks)
