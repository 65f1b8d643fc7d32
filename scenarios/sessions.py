"""Multi-turn sessions that share prefixes: a chat or customer-service conversation re-sends its whole context.

Sessions start by an arrival process. Session s has T_s turns; turn k's prompt is

    shared prefix (system prompt, P tokens) + Σ_{j≤k} user_j + Σ_{j<k} output_j

i.e. the previous prompt, the previous answer and the new user message. Turn k+1 arrives `think_time + tpot ·
output_k` seconds after turn k (an open-loop estimate of the answer's duration plus the user's think time; the
simulator does not feed its real latency back). A session stops at its last turn, before a turn whose prompt would
exceed `max_context_tokens`, or at the end of the window.

Prefix hashes (see `hashing.py`): block j of a session's token stream is shared across all sessions naming the
same `shared_prefix_name` when it lies wholly inside the P-token prefix, and private to the session otherwise;
each turn lists its prompt's full blocks, so turn k+1 repeats turn k's hashes and then adds new ones.

Vectorised over all turns of all sessions (segment cumulative sums); the one per-request Python step is slicing
each turn's hash view.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scenarios.arrivals.process import ArrivalProcess
from scenarios.hashing import name_salt, split_views, stream_hashes
from scenarios.rng import Streams
from scenarios.workload import Workload


def segment_cumsum(x: np.ndarray, first: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Inclusive cumulative sum restarting at each segment (`first[i]` = start row, `counts[i]` = rows)."""
    c = np.cumsum(x)
    return c - np.repeat(c[first] - x[first], counts)


@dataclass(frozen=True)
class TurnCount:
    """Turns per session: `fixed` (count), `geometric` (mean on {1, 2, …}, capped at `max`), `uniform`
    (low…high inclusive)."""

    kind: str
    a: float
    b: float = 0.0

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "fixed":
            return np.full(n, int(self.a), dtype=np.int64)
        if self.kind == "geometric":
            return np.minimum(rng.geometric(1.0 / self.a, n), int(self.b)).astype(np.int64)
        return rng.integers(int(self.a), int(self.b) + 1, n, dtype=np.int64)


@dataclass(frozen=True)
class ThinkTime:
    """Seconds between a turn's answer and the next message: `exponential` (mean a), `fixed` (a), `lognormal`
    (median a, p99 b)."""

    kind: str
    a: float
    b: float = 0.0

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "fixed":
            return np.full(n, self.a)
        if self.kind == "exponential":
            return rng.exponential(self.a, n)
        return rng.lognormal(np.log(self.a), np.log(self.b / self.a) / 2.3263478740408408, n)


@dataclass(frozen=True)
class SessionSpec:
    """Everything a session workload needs; token distributions have `sample(rng, n) -> int64 [n]`."""

    session_arrivals: ArrivalProcess
    turns: TurnCount
    think_time: ThinkTime
    user_tokens: object
    output_tokens: object
    first_user_tokens: object | None = None
    shared_prefix_tokens: int = 0
    shared_prefix_name: str = "system"
    max_context_tokens: int | None = None
    tpot_estimate_s: float = 0.0
    hash_block_tokens: int = 512


def session_workload(spec: SessionSpec, streams: Streams) -> Workload:
    """All turns of all sessions as one workload; `session_id` numbers sessions by start time."""
    start = spec.session_arrivals.sample(streams("sessions.arrivals"))  # [S]
    n_turns = spec.turns.sample(streams("sessions.turns"), start.shape[0])  # [S]
    first = np.cumsum(n_turns) - n_turns  # [S] row of each session's first turn (every session has >= 1 turn)
    session = np.repeat(np.arange(start.shape[0]), n_turns)  # [N]
    is_first = np.zeros(session.shape[0], dtype=bool)
    is_first[first] = True
    n = session.shape[0]
    user = spec.user_tokens.sample(streams("lengths.user"), n)
    if spec.first_user_tokens is not None:
        user[is_first] = spec.first_user_tokens.sample(streams("lengths.first_user"), int(is_first.sum()))
    output = spec.output_tokens.sample(streams("lengths.output"), n)
    prompt = spec.shared_prefix_tokens + segment_cumsum(user, first, n_turns) + segment_cumsum(output, first,
                                                                                              n_turns) - output
    prev_output = np.concatenate([[0], output[:-1]])
    gap = np.where(is_first, 0.0, spec.think_time.sample(streams("sessions.think"), n)
                   + spec.tpot_estimate_s * prev_output)
    arrival = start[session] + segment_cumsum(gap, first, n_turns)
    keep = arrival < spec.session_arrivals.duration_s
    if spec.max_context_tokens is not None:
        keep &= prompt <= spec.max_context_tokens  # prompts grow within a session, so this cuts a suffix
    session, prompt, output, arrival = session[keep], prompt[keep], output[keep], arrival[keep]
    block = spec.hash_block_tokens
    full_blocks = prompt // block
    most = np.zeros(start.shape[0], dtype=np.int64)
    np.maximum.at(most, session, full_blocks)
    salts = streams("hashes").integers(0, 2**63, start.shape[0], dtype=np.int64).view(np.uint64)
    shared = spec.shared_prefix_tokens // block
    flat, offsets = stream_hashes(salts, most, name_salt(spec.shared_prefix_name) if shared else None, shared)
    hashes = split_views(flat, offsets[session], full_blocks)
    return Workload.from_columns(
        arrival, prompt, output, session_id=session, prefix_hashes=hashes, hash_block_tokens=block,
        source=f"sessions({spec.session_arrivals.describe})",
        metadata={"sessions": int(start.shape[0]), **({"duration_s": spec.session_arrivals.duration_s}
                                                      if np.isfinite(spec.session_arrivals.duration_s) else {})})
