"""Batching policies that are presets of the one `Scheduler`: its rules fixed, the limits from the yaml.

`continuous` is iteration-level batching (Orca; vLLM without chunked prefill, a prompt prefilled whole) and
`chunked_prefill` the same with Sarathi-style chunked prefill; both take vLLM's default rules (on-demand
admission, recompute preemption, mixed iterations, one step, no host work) and price steady decode runs as one
event. Their yaml keys: `token_budget` (vLLM max_num_batched_tokens), `max_num_seqs`, and for `continuous` also
`chunked_prefill`.
"""
from __future__ import annotations

from typing import Any

from sim.core.instance.batching.scheduler import Scheduler
from sim.core.instance.kv_cache import BlockManager


class SchedulerPreset:
    """A `POLICIES` entry building a `Scheduler` with fixed rules from a batching yaml's parameters."""

    def __init__(self, name: str, chunked_prefill: bool, keys: tuple[str, ...]) -> None:
        self.name = name
        self.chunked_prefill = chunked_prefill  # its default (fixed unless `chunked_prefill` is one of `keys`)
        self.keys = keys                        # the yaml keys it takes

    def settings(self, params: dict) -> dict[str, Any]:
        """The `Scheduler` keyword settings for these yaml parameters (a TypeError names an unknown key)."""
        for key in params:
            if key not in self.keys:
                raise TypeError(f"{self.name} got an unexpected keyword argument {key!r} (valid: "
                                f"{', '.join(self.keys)})")
        token_budget, max_num_seqs = params.get("token_budget", 8192), params.get("max_num_seqs", 256)
        if token_budget < 1 or max_num_seqs < 1:
            raise ValueError('"token_budget" and "max_num_seqs" must be >= 1')
        return {"max_num_seqs": max_num_seqs, "max_num_batched_tokens": token_budget,
                "chunked_prefill": bool(params.get("chunked_prefill", self.chunked_prefill)), "steady_runs": True}

    def __call__(self, kv: BlockManager, **params: Any) -> Scheduler:
        return Scheduler(kv, **self.settings(params))

    def whole_prompt_limit(self, params: dict) -> int | None:
        """Without chunked prefill a prompt longer than the token budget is never scheduled."""
        if params.get("chunked_prefill", self.chunked_prefill):
            return None
        return int(params.get("token_budget", 8192))

    def __repr__(self) -> str:
        return f"SchedulerPreset({self.name!r})"


CONTINUOUS = SchedulerPreset("continuous", False, ("token_budget", "max_num_seqs", "chunked_prefill"))
CHUNKED_PREFILL = SchedulerPreset("chunked_prefill", True, ("token_budget", "max_num_seqs"))
