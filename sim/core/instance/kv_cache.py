"""Paged KV-cache accounting with an optional prefix cache and a second (host or disk) tier.

Only counts are simulated, never contents. A request holds its own blocks (`block_size_tokens` each) plus
references to shared prefix entries. A prefix entry is one hash block of the workload (`hash_block_tokens`, e.g.
Mooncake's 512) whose KV stays on the device after its request is done, until LRU eviction needs the space;
evicted entries drop to the second tier when one is configured (DeepSeek's on-disk KV cache, host memory), from
which a later hit loads them back at `tier2_bandwidth_bytes_per_s`. A `SharedKVTier` instead is one second tier
for every instance of a pool (DeepSeek's 3FS KVCache): prompts are written to it as they are prefilled, and any
instance loads from it at its own bandwidth, so a conversation's next turn hits wherever it runs.

Invariant INV-2: `used_blocks = sum(own blocks) + blocks of cached entries <= num_blocks` at all times; an
allocation that cannot be satisfied (after evicting unreferenced entries) changes nothing.
"""
from __future__ import annotations

from collections import OrderedDict

from sim.core.instance.request_state import SimRequest


class SharedKVTier:
    """A second KV tier shared by every instance of a pool: prefix entries (one hash block each) in LRU order,
    at most `capacity_entries` of them. Only which entries it holds is modelled; its read bandwidth is each
    reader's (`BlockManager.tier2_bandwidth_bytes_per_s`). Writes are not priced: the KV is copied out of the
    device after the prefill that made it, off the request's path (an assumption, stated where it is used)."""

    def __init__(self, capacity_bytes: float, entry_bytes: float) -> None:
        if capacity_bytes <= 0 or entry_bytes <= 0:
            raise ValueError('a shared KV tier needs capacity_bytes > 0 and entry_bytes > 0')
        self.capacity_entries = max(1, int(capacity_bytes // entry_bytes))
        self._lru: OrderedDict[int, None] = OrderedDict()  # least recently used first
        self.writes = 0
        self.evictions = 0

    def put(self, h: int) -> None:
        """Write (or refresh) entry `h`; the least recently used entry goes when the tier is full."""
        if h in self._lru:
            self._lru.move_to_end(h)
            return
        self._lru[h] = None
        self.writes += 1
        if len(self._lru) > self.capacity_entries:
            self._lru.popitem(last=False)
            self.evictions += 1

    def get(self, h: int) -> bool:
        """Whether entry `h` is held; a read makes it the most recently used."""
        if h not in self._lru:
            return False
        self._lru.move_to_end(h)
        return True

    def __contains__(self, h: int) -> bool:
        return h in self._lru

    def __len__(self) -> int:
        return len(self._lru)


class BlockManager:
    """KV blocks of one instance, and its prefix cache."""

    def __init__(self, num_blocks: int, block_size_tokens: int, *, prefix_caching: bool = False,
                 hash_block_tokens: int = 512, kv_bytes_per_token: float = 0.0, tier2_capacity_bytes: float = 0.0,
                 tier2_bandwidth_bytes_per_s: float = 0.0, shared_tier: SharedKVTier | None = None) -> None:
        if num_blocks < 1:
            raise ValueError('"num_blocks" must be >= 1')
        if block_size_tokens < 1 or hash_block_tokens < 1:
            raise ValueError('"block_size_tokens" and "hash_block_tokens" must be >= 1')
        self.num_blocks = num_blocks
        self.block_size_tokens = block_size_tokens
        self.used_blocks = 0
        self.peak_used_blocks = 0
        # Prefix cache: hash -> reference count, in LRU order (oldest first).
        self.prefix_caching = prefix_caching
        self.hash_block_tokens = hash_block_tokens
        self.blocks_per_entry = -(-hash_block_tokens // block_size_tokens)
        self._entries: dict[int, int] = {}
        self._free_entries: OrderedDict[int, None] = OrderedDict()  # unreferenced entries, least recently used first
        self.kv_bytes_per_token = kv_bytes_per_token
        self.tier2_capacity_entries = int(tier2_capacity_bytes // max(1.0, kv_bytes_per_token * hash_block_tokens)) \
            if tier2_capacity_bytes > 0 and kv_bytes_per_token > 0 and shared_tier is None else 0
        self.shared_tier = shared_tier  # the pool's shared second tier (replaces the per-instance one)
        self.tier2_bandwidth_bytes_per_s = tier2_bandwidth_bytes_per_s
        self._tier2: OrderedDict[int, None] = OrderedDict()
        self.hits_tokens = 0
        self.tier2_hits_tokens = 0
        self.lookups_tokens = 0

    # -- plain blocks -----------------------------------------------------------------------------------------
    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size_tokens)

    @property
    def free_blocks(self) -> int:
        return self.num_blocks - self.used_blocks

    @property
    def utilization(self) -> float:
        """Fraction of blocks in use, cached prefix entries included (what the device holds)."""
        return self.used_blocks / self.num_blocks

    @property
    def active_utilization(self) -> float:
        """Fraction of blocks held by requests: unreferenced prefix entries are evictable, so they do not count
        as load (routers and autoscalers read this one)."""
        return (self.used_blocks - len(self._free_entries) * self.blocks_per_entry) / self.num_blocks

    def held(self, req: SimRequest) -> int:
        """Own blocks `req` holds here."""
        return req.kv_held_blocks if req.kv_owner is self else 0

    @property
    def _unreferenced(self) -> int:
        return len(self._free_entries)

    def _own_blocks_for(self, req: SimRequest, tokens: int) -> int:
        shared = req.kv_shared_tokens if req.kv_owner is self else 0
        return self.blocks_for(max(0, tokens - shared))

    def _hold(self, req: SimRequest) -> None:
        """Make this manager the holder of `req`'s KV state (it holds nothing here yet, or already is)."""
        if req.kv_owner is not self:
            assert req.kv_owner is None, "a request's KV is held by one block manager at a time"
            req.kv_owner = self
            req.kv_held_blocks = req.kv_covered_tokens = req.kv_shared_tokens = 0
            req.kv_refs = None

    def _release_entry(self, h: int) -> None:
        self._entries[h] -= 1
        if self._entries[h] == 0:
            self._free_entries[h] = None  # most recently used end

    def _acquire_entry(self, h: int) -> None:
        if self._entries[h] == 0:
            del self._free_entries[h]
        self._entries[h] += 1

    def _room_possible(self, blocks: int) -> bool:
        """Whether `blocks` can be freed, evicting every unreferenced prefix entry if need be."""
        return blocks <= self.free_blocks + self._unreferenced * self.blocks_per_entry

    def _make_room(self, blocks: int) -> bool:
        """Evict unreferenced prefix entries (LRU first) until `blocks` are free; False if impossible."""
        if blocks <= self.free_blocks:
            return True
        if not self._room_possible(blocks):
            return False  # (and nothing evicted)
        while blocks > self.free_blocks:
            h, _ = self._free_entries.popitem(last=False)
            del self._entries[h]
            self.used_blocks -= self.blocks_per_entry
            if self.tier2_capacity_entries:
                self._tier2[h] = None
                self._tier2.move_to_end(h)
                if len(self._tier2) > self.tier2_capacity_entries:
                    self._tier2.popitem(last=False)
        return blocks <= self.free_blocks

    def _take(self, blocks: int) -> None:
        self.used_blocks += blocks
        if self.used_blocks > self.peak_used_blocks:
            self.peak_used_blocks = self.used_blocks

    def can_grow(self, req: SimRequest, tokens: int) -> bool:
        need = self._own_blocks_for(req, tokens) - self.held(req)
        return self._room_possible(need)

    def grow(self, req: SimRequest, tokens: int) -> bool:
        """Make the request hold enough own blocks for `tokens` tokens of KV (beyond its shared prefix);
        False, and no change, if they cannot be found even after evicting unreferenced prefix entries."""
        if req.kv_owner is self and req.kv_covered_tokens >= tokens:
            return True  # fast path: the blocks it holds already cover `tokens` (the common decode step)
        held = self.held(req)
        need = self._own_blocks_for(req, tokens) - held
        if need <= 0:
            return True
        if not self._make_room(need):
            return False
        self._hold(req)
        req.kv_held_blocks = held + need
        self._cover_again(req)
        self._take(need)
        return True

    def _cover_again(self, req: SimRequest) -> None:
        """The KV tokens `req`'s own blocks and referenced entries cover (`grow`'s one-read test), after either changed."""
        req.kv_covered_tokens = req.kv_held_blocks * self.block_size_tokens + req.kv_shared_tokens

    def free(self, req: SimRequest) -> None:
        """Release the request's own blocks and its references to prefix entries (nothing when it holds none here)."""
        if req.kv_owner is not self:
            return
        self.used_blocks -= req.kv_held_blocks
        refs = req.kv_refs
        if refs is not None:
            for h in refs:
                if h in self._entries:
                    self._release_entry(h)
        req.kv_owner, req.kv_refs = None, None
        req.kv_held_blocks = req.kv_covered_tokens = req.kv_shared_tokens = 0

    # -- prefix cache -----------------------------------------------------------------------------------------
    def match_prefix(self, req: SimRequest, hashes, prompt_tokens: int) -> tuple[int, float]:
        """Reference the longest cached prefix of `hashes`; returns (tokens whose prefill is skipped, seconds to
        load second-tier entries). At least one prompt token is always computed (its logits start decoding).
        Call `free(req)` to undo when the request is not admitted after all."""
        if not self.prefix_caching or hashes is None or len(hashes) == 0:
            return 0, 0.0
        full = min(len(hashes), prompt_tokens // self.hash_block_tokens)
        self.lookups_tokens += full * self.hash_block_tokens
        refs: list[int] = []
        loaded = 0
        for h in hashes[:full]:
            h = int(h)
            if h in self._entries:
                self._acquire_entry(h)
                if self.shared_tier is not None:
                    self.shared_tier.get(h)  # used anywhere in the pool: recently used in the shared tier
            elif h in self._tier2 or (self.shared_tier is not None and h in self.shared_tier):
                if not self._room_possible(self.blocks_per_entry):
                    break  # no room on the device: the entry stays where it is in tier 2
                if self.shared_tier is not None:
                    self.shared_tier.get(h)  # (a copy is loaded: the shared tier keeps it, now recently used)
                else:
                    # Take the entry out of tier 2 first: making room on the device may push other entries down
                    # to tier 2 and trim its oldest, which must not be this one.
                    del self._tier2[h]
                self._make_room(self.blocks_per_entry)  # (possible: checked above)
                self._entries[h] = 1
                self._take(self.blocks_per_entry)
                loaded += 1
            else:
                break
            refs.append(h)
        if not refs:
            return 0, 0.0
        self._hold(req)
        req.kv_refs = refs
        shared = len(refs) * self.hash_block_tokens
        req.kv_shared_tokens = shared
        self._cover_again(req)
        self.hits_tokens += shared
        self.tier2_hits_tokens += loaded * self.hash_block_tokens
        load_s = 0.0
        if loaded and self.tier2_bandwidth_bytes_per_s > 0:
            load_s = loaded * self.hash_block_tokens * self.kv_bytes_per_token / self.tier2_bandwidth_bytes_per_s
        return min(shared, prompt_tokens - 1), load_s

    def publish(self, req: SimRequest, hashes, prompt_tokens: int) -> None:
        """After a prefill: the request's full prompt hash blocks beyond its matched prefix become cache entries
        (their blocks move from the request to the cache; the request keeps a reference until it ends)."""
        if not self.prefix_caching or hashes is None:
            return
        self._hold(req)
        refs = req.kv_refs
        if refs is None:
            refs = req.kv_refs = []
        full = min(len(hashes), prompt_tokens // self.hash_block_tokens)
        start = len(refs)
        for h in hashes[start:full]:
            h = int(h)
            own = req.kv_held_blocks
            if h in self._entries or own < self.blocks_per_entry:
                break  # NOTE: a concurrent duplicate keeps its own copy; the prefix chain stops at the first gap
            req.kv_held_blocks = own - self.blocks_per_entry
            self._entries[h] = 1
            refs.append(h)
            req.kv_shared_tokens += self.hash_block_tokens
            if self.shared_tier is not None:
                self.shared_tier.put(h)  # written through to the pool's shared tier
        self._cover_again(req)

    def cached_prefix_entries(self, hashes) -> int:
        """How many leading entries of `hashes` are cached on the device (for routing; no side effects)."""
        if not self.prefix_caching:
            return 0
        n = 0
        for h in hashes:
            if int(h) not in self._entries:
                break
            n += 1
        return n

    @property
    def cached_entries(self) -> int:
        return len(self._entries)
