"""An engine's front-end time: what its API server does to a request outside the GPU kernels, as one delay between
the request's arrival at the instance and its entry into the scheduler's `waiting` queue.

delay_s = per_request_s + per_prompt_token_s x prompt tokens + per_stream_s x streams + per_prefill_s x prefill_s

* per_request_s: receive (HTTP, JSON), admission into the engine core (the inter-process hop of vLLM V1's
  AsyncLLM / SGLang's TokenizerManager / TRT-LLM's executor queue), and the first token's detokenise and stream.
  The first token's trip back to the client is folded in here: it delays every later token alike, so TPOT is
  unchanged.
* per_prompt_token_s: tokenising the prompt and hashing its KV blocks (prefix caching).
* per_stream_s: the API server is one Python process; each stream it is serving (`streams`: the requests the
  instance holds when this one arrives, waiting or running) takes its share of that process per iteration
  (detokenise, build and send the chunk), so a new request waits longer the more streams there are.
* per_prefill_s (seconds per second): a delay in proportion to `prefill_s`, the request's own prompt priced as one
  prefill on the idle instance (the cost model's price: the GPU, the model, TP and the kernels). Not a mechanism
  but what the measured rows show: at low concurrency every engine's measured TTFT exceeds the simulated one by a
  gap that grows with the prompt and shrinks with TP (docs/validation.md, "What the engine time is not"), while
  the measured TPOT says the GPU does not spend it. Only this delay is in proportion to the prefill; the GPU's
  iterations stay priced as before.

Units: seconds, tokens, streams. All zero (the default): no delay, the request enters the scheduler at once and
nothing else changes. The parameters live in the engine presets (`conf/engine/*.yaml`, `frontend_*` keys); where
no published measurement exists they are fitted on measured serving runs (`python -m sim.validate.silicon.fit`).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FrontEnd:
    per_request_s: float = 0.0
    per_prompt_token_s: float = 0.0
    per_stream_s: float = 0.0
    per_prefill_s: float = 0.0

    def __post_init__(self) -> None:
        if min(self.per_request_s, self.per_prompt_token_s, self.per_stream_s, self.per_prefill_s) < 0.0:
            raise ValueError('"frontend_per_request_s", "frontend_per_prompt_token_s", "frontend_per_stream_s" and '
                             '"frontend_per_prefill_s" must be >= 0')

    @property
    def active(self) -> bool:
        return (self.per_request_s > 0.0 or self.per_prompt_token_s > 0.0 or self.per_stream_s > 0.0
                or self.per_prefill_s > 0.0)

    def delay_s(self, prompt_tokens: int, streams: int, prefill_s: float = 0.0) -> float:
        """Seconds from the request's arrival at the instance to its entry into the scheduler (>= 0); `prefill_s`:
        the prompt's prefill alone on the idle instance."""
        return (self.per_request_s + self.per_prompt_token_s * prompt_tokens + self.per_stream_s * streams
                + self.per_prefill_s * prefill_s)
