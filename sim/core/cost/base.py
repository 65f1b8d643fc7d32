"""The cost-model extension point: what one batch iteration costs.

The instance scheduler hands the cost model a `BatchShape` (aggregates of the iteration's prefill chunks and
decodes) and gets back a `StepCost` whose named parts sum to the total. Units: seconds, tokens.
"""
from __future__ import annotations

from typing import Final, NamedTuple, Protocol

PARTS: tuple[str, ...] = ("attention", "dense_gemm", "moe_gemm", "elementwise", "communication", "overhead")


class BatchShape(NamedTuple):
    """Aggregates of one iteration's work (what the cost of every op depends on).

    A prefill chunk of q new tokens after c tokens already in the KV cache contributes q to `prefill_tokens`,
    q*c to `prefill_q_ctx_sum`, q*(q+1)/2 to `prefill_q_sq_sum` and c+q to `prefill_kv_tokens`. A decode of a
    sequence whose context (before this step) is c contributes 1 to `decode_seqs` and c+1 to `decode_ctx_sum`.
    `sampled_seqs` counts sequences that emit a token this step (LM head rows). A NamedTuple: made and hashed
    once per iteration on the simulator's hot path, where a frozen dataclass costs several times more.
    """

    prefill_seqs: int = 0
    prefill_tokens: int = 0
    prefill_q_ctx_sum: int = 0
    prefill_q_sq_sum: int = 0
    prefill_kv_tokens: int = 0
    decode_seqs: int = 0
    decode_ctx_sum: int = 0
    sampled_seqs: int = 0

    @property
    def num_tokens(self) -> int:
        """Tokens processed by the dense layers this step."""
        return self.prefill_tokens + self.decode_seqs


def one_prompt(tokens: int) -> BatchShape:
    """One prefill of a `tokens`-token prompt with nothing cached (the front end's per-prefill term prices it)."""
    return BatchShape(1, tokens, 0, tokens * (tokens + 1) // 2, tokens, 0, 0, 1)


class StepCost:
    """An iteration's time and its decomposition; `sum(parts.values()) == total_s` up to rounding. `parts` has
    the PARTS keys in PARTS order (the simulator accounts them as a vector).

    `hidden_s` is communication that ran under compute (two-micro-batch overlap): real work, but not part of the
    iteration's time, so it is not in `parts`.

    A value: never changed once made (the step cache hands the same one to every instance of a pool).
    """

    __slots__ = ("total_s", "parts", "hidden_s")

    def __init__(self, total_s: float, parts: dict[str, float], hidden_s: float = 0.0) -> None:
        self.total_s: Final = total_s
        self.parts: Final = parts
        self.hidden_s: Final = hidden_s

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StepCost):
            return NotImplemented
        return self.total_s == other.total_s and self.parts == other.parts and self.hidden_s == other.hidden_s

    def __repr__(self) -> str:
        return f"StepCost(total_s={self.total_s!r}, parts={self.parts!r}, hidden_s={self.hidden_s!r})"


class CostModel(Protocol):
    """Prices one batch iteration of one instance.

    `step_cost(b, load_s, host_s, overlap, back_to_back)` is the one price of an iteration the scheduler formed:
    shape b, with `load_s` seconds of KV loaded before it runs and `host_s` seconds of per-sequence host work
    exposed by `overlap` (`sim.core.cost.host_overlap`), `back_to_back` saying whether the previous iteration of
    the instance ended exactly when this one starts. The caller adds nothing to it. With the defaults (no load,
    no host work) it is the shape's price alone.
    Postconditions: `step_cost(b).total_s > 0` for any non-empty batch (a zero-time step would stall the
    simulation clock), parts are ≥ 0 and sum to the total; the result depends only on the arguments
    (deterministic).
    `kind` is "measured", "analytical" or "mixed"; `describe()` says which ops came from where.
    `tokens_per_step` is the expected tokens a decoding sequence emits per iteration (1.0; more with speculative
    decoding / MTP, where `draft_tokens` drafts are verified per step with acceptance probabilities `acceptance`).
    `decode_steps(b, steps)` is the simulator's form of a run of decode-only iterations whose contexts grow by one
    token per sequence per step: (table, first, stride), step j costing `table.times[first + j * stride]`
    (a `sim.core.cost.tables.StepTable`, whose `run_parts` splits a run's time into parts). Step j of a run is
    `step_cost` of its shape: a run has no KV to load and no host work (the scheduler prices such iterations one
    by one), so the two paths agree.
    """

    @property
    def kind(self) -> str: ...

    tokens_per_step: float
    draft_tokens: int                   # speculative drafts verified per decode step (0: none)
    acceptance: tuple[float, ...]       # acceptance probability of each draft (len == draft_tokens)

    def step_cost(self, batch: BatchShape, load_s: float = 0.0, host_s: float = 0.0, overlap: int = 0,
                  back_to_back: bool = False) -> StepCost: ...

    def decode_steps(self, batch: BatchShape, steps: int) -> tuple: ...

    def describe(self) -> dict: ...
