"""A request's mutable state inside the simulator (vLLM's vocabulary: `num_computed_tokens`, `preempted`)."""
from __future__ import annotations

import math


class SimRequest:
    """Progress and timestamps of one request. Times are absolute simulated seconds; NaN until reached.

    `num_computed_tokens` counts tokens whose KV is computed (prompt, then generated tokens one step behind);
    the prompt is done when it reaches `prompt_tokens`, which also emits the first output token.
    """

    __slots__ = ("request_id", "arrival_s", "prompt_tokens", "output_tokens", "request_class", "priority",
                 "prefix_hashes", "num_computed_tokens", "num_output_tokens", "cached_tokens", "first_token_s",
                 "finish_s", "status", "reject_reason", "pool", "instance", "preemptions", "enqueued_s", "next_pool",
                 "fallback", "prefill_pool", "delivered_tokens", "last_token_s", "itl_max_s", "kv_owner",
                 "kv_held_blocks", "kv_covered_tokens", "kv_shared_tokens", "kv_refs", "first_token_delay_s")

    def __init__(self, request_id: int, arrival_s: float, prompt_tokens: int, output_tokens: int,
                 request_class: int = 0, priority: int = 0, prefix_hashes=None) -> None:
        self.request_id = request_id
        self.arrival_s = arrival_s
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.request_class = request_class
        self.priority = priority
        self.prefix_hashes = prefix_hashes
        self.num_computed_tokens = 0
        self.num_output_tokens = 0
        self.cached_tokens = 0
        self.first_token_s = math.nan
        self.finish_s = math.nan
        self.status = "unfinished"
        self.reject_reason = ""
        self.pool = ""
        self.instance = -1
        self.preemptions = 0
        self.enqueued_s = math.nan
        self.next_pool = ""        # its route onward: the decode pool it moves to after its first token ("" none)
        self.fallback = False      # served by the overload fallback pool
        self.prefill_pool = ""     # where its prefill ran, when disaggregated
        self.delivered_tokens = 0  # output tokens sent to the client so far (ITL: one gap per delivery)
        self.last_token_s = math.nan   # when the last delivery was sent
        self.itl_max_s = math.nan      # the longest gap between consecutive deliveries
        self.first_token_delay_s = 0.0  # the front end's delay on the first token's way to the client
        # Its KV in the one block manager that holds it (`kv_owner`; None: none), kept by that manager
        # (`sim.core.instance.kv_cache`): on the request, so that the common decode step's test is an attribute read.
        self.kv_owner: object | None = None
        self.kv_held_blocks = 0     # own blocks
        self.kv_covered_tokens = 0  # KV tokens its own blocks and referenced prefix entries cover
        self.kv_shared_tokens = 0   # tokens of the prefix entries it references
        self.kv_refs: list[int] | None = None  # hashes of the prefix entries it references

    @property
    def handoff(self) -> bool:
        """Whether the request leaves its instance after its first token (prefill pool of a P/D pair). Derived
        from its route (`next_pool`), which only the cluster sets: the one owner of the hand-off."""
        return self.next_pool != ""

    @property
    def total_tokens(self) -> int:
        """Tokens whose KV the request holds at its end (the last output token's KV is never computed)."""
        return self.prompt_tokens + self.output_tokens - 1

    @property
    def in_prefill(self) -> bool:
        return self.num_computed_tokens < self.prompt_tokens

    def restart(self) -> None:
        """Its instance failed: the KV is gone, so it starts over on another instance, recomputing its prompt and
        the tokens it already emitted (which stay emitted: its first token time is kept). Not a preemption."""
        self.num_computed_tokens = 0
        self.cached_tokens = 0

    def reset_for_recompute(self) -> None:
        """Preemption by recomputation: drop the KV; generated tokens are re-prefilled with the prompt."""
        self.preemptions += 1
        self.num_computed_tokens = 0
        self.cached_tokens = 0
