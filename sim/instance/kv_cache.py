"""Paged KV-cache accounting: blocks of `block_size_tokens`, allocated per request, freed on finish or preemption.

Only counts are simulated (no contents). Invariant INV-KV: `used_blocks <= num_blocks` at all times; a failed
allocation changes nothing.
"""
from __future__ import annotations


class BlockManager:
    """Counts the KV blocks each request holds on one instance."""

    def __init__(self, num_blocks: int, block_size_tokens: int) -> None:
        if num_blocks < 1:
            raise ValueError('"num_blocks" must be >= 1')
        if block_size_tokens < 1:
            raise ValueError('"block_size_tokens" must be >= 1')
        self.num_blocks = num_blocks
        self.block_size_tokens = block_size_tokens
        self.used_blocks = 0
        self.peak_used_blocks = 0
        self._held: dict[int, int] = {}

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size_tokens)

    @property
    def free_blocks(self) -> int:
        return self.num_blocks - self.used_blocks

    @property
    def utilization(self) -> float:
        return self.used_blocks / self.num_blocks

    def held(self, request_id: int) -> int:
        return self._held.get(request_id, 0)

    def can_grow(self, request_id: int, tokens: int) -> bool:
        """Whether the request can hold `tokens` tokens of KV (counting what it already holds)."""
        return self.blocks_for(tokens) - self._held.get(request_id, 0) <= self.free_blocks

    def grow(self, request_id: int, tokens: int) -> bool:
        """Make the request hold enough blocks for `tokens` tokens; False (and no change) if they do not fit."""
        need = self.blocks_for(tokens) - self._held.get(request_id, 0)
        if need <= 0:
            return True
        if need > self.free_blocks:
            return False
        self._held[request_id] = self._held.get(request_id, 0) + need
        self.used_blocks += need
        if self.used_blocks > self.peak_used_blocks:
            self.peak_used_blocks = self.used_blocks
        return True

    def free(self, request_id: int) -> None:
        self.used_blocks -= self._held.pop(request_id, 0)
