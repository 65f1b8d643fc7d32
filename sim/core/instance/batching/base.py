"""What every scheduler shares: the `BatchingPolicy` protocol, the registry's `PolicyFactory`, and the steps on
requests that all of them take the same way (token accounting after an iteration, prefix matching at admission,
steady decode runs, speculative tokens).

Each registered policy is a `PolicyFactory`: called as `factory(kv, **yaml_parameters)` it builds the policy for
one instance. Adding one: a module in this package, one line in `POLICIES` (`__init__.py`), one yaml in
`conf/batching/` named like the key.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Protocol

from sim.core.instance.batch import ScheduledBatch
from sim.core.instance.kv_cache import BlockManager
from sim.core.instance.request_state import SimRequest


class BatchingPolicy(Protocol):
    """Forms iterations for one instance.

    `schedule(now)` returns the next batch, a float wake-up time (simulated s, > now) when the policy is
    deliberately waiting (e.g. for a batch to fill), or None when it has nothing to do. `steady_steps(batch)`
    says how many decode iterations from `batch` on can be priced as one run (0 or 1: step normally);
    `joins_next_boundary()` whether a request that just arrived during such a run could join at its next
    iteration boundary (the run is cut there only then). `update_from_output` advances every scheduled request
    by its tokens at time `now` (the end of the iteration) and returns the requests that left it (finished, or
    handed to a decode pool); `drop_all()` empties the policy when its instance fails. Guarantees: a request is
    in at most one of `waiting`/`running`; KV blocks are allocated through `kv` only, so INV-KV holds.
    """

    waiting: deque[SimRequest]
    running: list[SimRequest]
    lookahead_tokens: int      # KV slots to reserve beyond each decode for speculative drafts (set by the instance)
    undelivered: set[int]      # request ids whose computed tokens the policy has not sent yet (multi-step groups)

    @classmethod
    def whole_prompt_limit(cls, params: dict) -> int | None:
        """The longest prompt an instance can ever schedule with these yaml parameters, when prompts are
        scheduled whole (None: any length). The pool refuses a configuration whose limit is below the model's
        context, since such prompts would wait forever."""
        ...

    def add_request(self, req: SimRequest, now: float) -> None: ...

    def schedule(self, now: float) -> ScheduledBatch | float | None: ...

    def steady_steps(self, batch: ScheduledBatch) -> int: ...

    def joins_next_boundary(self) -> bool: ...

    def update_from_output(self, batch: ScheduledBatch, now: float) -> list[SimRequest]: ...

    def drop_all(self) -> list[SimRequest]:
        """The instance failed: every request the policy holds (waiting, running or set aside, e.g. swapped out),
        leaving it empty. The caller frees their KV."""
        ...


class PolicyFactory(Protocol):
    """A `POLICIES` entry: a policy class, or a preset of the one `Scheduler` (presets.py)."""

    def __call__(self, *args: Any, **params: Any) -> BatchingPolicy:
        """The policy over one instance's KV (`kv`, the one positional argument) with the yaml's parameters."""
        ...

    def whole_prompt_limit(self, params: dict) -> int | None: ...


def take_all(waiting: deque[SimRequest], running: list[SimRequest]) -> list[SimRequest]:
    """`drop_all` of a policy that holds requests only in `waiting` and `running`: both emptied in place."""
    held = [*running, *waiting]
    running.clear()
    waiting.clear()
    return held


def complete(req: SimRequest, now: float, kv: BlockManager) -> None:
    """The request emitted its last token at `now`: it is done and its KV is released."""
    req.finish_s = now
    req.status = "completed"
    kv.free(req)


def leaves(req: SimRequest, now: float, kv: BlockManager, lagging: list[SimRequest] | None) -> bool:
    """A token of `req` reached its client at `now` (a first token is recorded by the instance:
    `Instance._first_token`); the last completes it (releasing its KV, or with `lagging` keeping it there for one more iteration: SGLang's overlap scheduler has
    formed the next iteration before it sees the finish); a disaggregated prefill's first token hands it to a
    decode pool (the cluster prices the KV transfer; the blocks here are released). True when it leaves."""
    out = req.num_output_tokens
    if out >= req.output_tokens:
        if lagging is None:
            complete(req, now, kv)
        else:
            req.finish_s = now
            req.status = "completed"
            lagging.append(req)
        return True
    if out == 1 and req.handoff:
        kv.free(req)
        return True
    return False


def drop_finished(running: list[SimRequest], finished: list[SimRequest]) -> None:
    """Remove the requests that left from `running`, keeping its order."""
    if len(finished) == 1:  # the common case: one request leaves, found by identity
        gone = finished[0]
        for j in range(len(running)):
            if running[j] is gone:
                del running[j]
                break
    elif finished:
        done = {r.request_id for r in finished}
        running[:] = [r for r in running if r.request_id not in done]


def advance(batch: ScheduledBatch, now: float, kv: BlockManager, running: list[SimRequest],
            lagging: list[SimRequest] | None = None, held: set[int] | None = None) -> list[SimRequest]:
    """Apply an iteration's results: computed tokens grow (a prompt's last publishes its prefix-cache blocks); a
    request that caught up with its known tokens samples one output token. Returns the requests that left
    `running` (see `leaves`). With `held` (a multi-step group whose tokens reach the client at its end: vLLM
    0.6.0), a sampled token is recorded there instead and nobody leaves until the group delivers it."""
    finished: list[SimRequest] = []
    for req, n in batch.items:
        c, prompt = req.num_computed_tokens, req.prompt_tokens
        if c < prompt <= c + n:
            kv.publish(req, req.prefix_hashes, prompt)
        c += n
        req.num_computed_tokens = c
        if c == prompt + req.num_output_tokens:  # caught up with its known tokens
            out = req.num_output_tokens = req.num_output_tokens + 1
            if held is not None:
                held.add(req.request_id)
            elif (out == 1 or out >= req.output_tokens) and leaves(req, now, kv, lagging):
                finished.append(req)
    if finished:
        drop_finished(running, finished)
    return finished


def match_prefix(kv: BlockManager, req: SimRequest) -> float:
    """On (re)admission of a request with nothing computed: skip the cached part of its prompt. Returns the
    seconds needed to load second-tier entries (0 when none). Undo with `kv.free(req)` and
    `req.num_computed_tokens = req.cached_tokens = 0` if the request is not admitted after all."""
    if req.num_computed_tokens or req.prefix_hashes is None:
        return 0.0
    cached, load_s = kv.match_prefix(req, req.prefix_hashes, req.prompt_tokens)
    req.num_computed_tokens = req.cached_tokens = cached
    return load_s


def unmatch_prefix(kv: BlockManager, req: SimRequest) -> None:
    kv.free(req)
    req.num_computed_tokens = req.cached_tokens = 0


def steady_decode_steps(batch: ScheduledBatch, kv: BlockManager) -> int:
    """How many iterations, starting with `batch`, can be priced as one run: from the second on, the same
    decode-only membership, with no finish before the last of them and with KV growth that fits the free blocks
    (so no eviction or preemption can occur). The first may also finish prefills (a whole prompt, or the recompute
    of a preempted request) whose requests then decode with the rest: the common life of a request that arrives
    at an idle instance, one event instead of two. Not when a prefill publishes prefix-cache blocks or hands the
    request to another pool after its first token (both act at that step's end), nor after a second-tier load.
    0 or 1 means step normally. The caller guarantees that nothing can join in between until an arrival cuts
    the run short."""
    items = batch.items
    if batch.load_s:
        return 0
    if batch.shape.prefill_seqs:
        for req, n in items:
            if (req.num_computed_tokens + n != req.prompt_tokens + req.num_output_tokens
                    or req.prefix_hashes is not None or req.handoff):
                return 0
    steps = -1
    for req, _ in items:
        left = req.output_tokens - req.num_output_tokens
        if steps < 0 or left < steps:
            steps = left
    if steps < 2:
        return 0
    free = kv.free_blocks
    while steps >= 2:
        # KV after `steps` iterations: each request holds its tokens after the first (c + n) plus steps - 1.
        need = 0
        for req, n in items:
            need += kv._own_blocks_for(req, req.num_computed_tokens + n + steps - 1) - kv.held(req)
        if need <= free:
            return steps
        steps //= 2
    return 0


def bulk_decode(items: list[tuple[SimRequest, int]], steps: int, kv: BlockManager) -> None:
    """Apply `steps` decode iterations at once (none of which finishes a request): each request computes and
    emits `steps` tokens; KV grows accordingly (guaranteed to fit by `steady_decode_steps`)."""
    for req, _ in items:
        req.num_computed_tokens += steps
        req.num_output_tokens += steps
        ok = kv.grow(req, req.num_computed_tokens + 1)
        assert ok, "INV-2: bulk decode outgrew the KV blocks it checked"


def accept_tokens(req: SimRequest, k: int, now: float, kv: BlockManager, running: list[SimRequest]) -> bool:
    """Speculative decoding: `k` extra tokens accepted in the step that just ended (their KV was reserved through
    the policy's lookahead slots). Returns True when that finishes the request (its KV is freed, it leaves
    `running`)."""
    req.num_computed_tokens += k
    req.num_output_tokens += k
    if req.num_output_tokens < req.output_tokens:
        return False
    complete(req, now, kv)
    running.remove(req)
    return True
