"""An engine's front-end time: what its API server does to a request outside the GPU kernels, as one delay on the
request's path, placed by `path`:

* `entry`: between the request's arrival at the instance and its entry into the scheduler's `waiting` queue (the
  scheduler sees the request that much later).
* `first_token`: between the engine emitting the request's first token and the client receiving it. The scheduler
  takes the request at once; the client sees its first token the delay later, and no later token before that (a
  stream is delivered in order), so a closed-loop client's next request waits for whichever comes later. The
  engine's iterations are those of no front end at all.

delay_s = per_request_s + per_prompt_token_s x prompt tokens + per_stream_s x streams
          + (per_prefill_s + per_prefill_stream_s x streams) x prefill_s
          + (per_step + per_step_token x prompt tokens) x step_s

* per_request_s: receive (HTTP, JSON), admission into the engine core (the inter-process hop of vLLM V1's
  AsyncLLM / SGLang's TokenizerManager / TRT-LLM's executor queue), and the first token's detokenise and stream.
* per_prompt_token_s: tokenising the prompt and hashing its KV blocks (prefix caching).
* per_stream_s: the API server is one Python process; each stream it is serving (`streams`: the requests the
  instance holds when this one arrives, waiting or running) takes its share of that process per iteration
  (detokenise, build and send the chunk), so a new request's chunk waits longer the more streams there are.
* per_prefill_s (seconds per second): a delay in proportion to `prefill_s`, the request's own prompt priced as one
  prefill on the idle instance (the cost model's price: the GPU, the model, TP and the kernels). Not a mechanism
  but what the measured rows show: at low concurrency every engine's measured TTFT exceeds the simulated one by a
  gap that grows with the prompt and shrinks with TP (docs/validation.md, "What the engine time is not"), while
  the measured TPOT says the GPU does not spend it. Only this delay is in proportion to the prefill; the GPU's
  iterations stay priced as before.
* per_prefill_stream_s (seconds per second per stream): the same delay growing with the streams held. Also what the
  rows show, not a mechanism: on the H100 Qwen3-32B vLLM and TensorRT-LLM rows the measured TTFT over the prompt's
  prefill alone is ~3.3 at 8 clients, ~4.8 at 32 and ~10.5 at 128, whatever the prompt, output length and TP
  (docs/validation.md, "TTFT in proportion to the prefill, growing with the streams").
* per_step, per_step_token (iterations, and iterations per prompt token): a delay counted in the instance's own
  iterations, `step_s` being its recent iteration time (an exponential average over its last iterations, what a
  stream's time per output token is while it runs; 0 before its first iteration). What the rows show: on every
  engine, model, TP and concurrency, the measured TTFT beyond the simulated one divided by the measured TPOT is
  nearly constant in the concurrency and grows linearly with the prompt (vLLM gpt-oss-120b on H200: ~7 iterations
  at 1k tokens, ~32 at 8k, at 4 to 64 clients and TP 1 to 8; docs/validation.md, "TTFT in iterations"). A
  delay in iterations carries the concurrency, the model, TP and the GPU through the iteration time, which the
  cost model prices; a delay in seconds or in proportion to the prefill does not carry them across models. On a
  prefill-role pool's instance (disaggregated serving) `step_s` is the decode pool's recent iteration time: the
  pool that streams the tokens (`Pool.streams_on`), not its own prefills.

The front end takes a request once, where it arrives: a request a prefill pool hands to its decode pool is not
delayed again there.

Why two paths. A delay at `entry` holds each closed-loop client's next request away from the scheduler while the
running requests keep decoding, so requests that finish within the delay of one another arrive together, and a
run whose requests all have the same lengths stays in bursts forever; at `first_token` the scheduler sees each
request when it is sent (docs/validation.md, "Where the engine time sits").

Units: seconds, tokens, streams. All zero (the default): no delay, nothing changes. The parameters live in the
engine presets (`conf/engine/*.yaml`, `frontend_*` keys); where no published measurement exists they are fitted on
measured serving runs (`python -m sim.validate.silicon.fit`).
"""
from __future__ import annotations

from dataclasses import dataclass


PATHS = ("entry", "first_token")


@dataclass(frozen=True)
class FrontEnd:
    per_request_s: float = 0.0
    per_prompt_token_s: float = 0.0
    per_stream_s: float = 0.0
    per_prefill_s: float = 0.0
    per_prefill_stream_s: float = 0.0
    path: str = "entry"
    per_step: float = 0.0
    per_step_token: float = 0.0

    def __post_init__(self) -> None:
        if self.path not in PATHS:
            raise ValueError(f'"frontend_path" must be one of {", ".join(PATHS)}, not {self.path!r}')
        if min(self.per_request_s, self.per_prompt_token_s, self.per_stream_s, self.per_prefill_s,
               self.per_prefill_stream_s, self.per_step, self.per_step_token) < 0.0:
            raise ValueError('"frontend_per_request_s", "frontend_per_prompt_token_s", "frontend_per_stream_s", '
                             '"frontend_per_prefill_s", "frontend_per_prefill_stream_s", "frontend_per_step" and '
                             '"frontend_per_step_token" must be >= 0')

    @property
    def active(self) -> bool:
        return (self.per_request_s > 0.0 or self.per_prompt_token_s > 0.0 or self.per_stream_s > 0.0
                or self.needs_prefill or self.per_step > 0.0 or self.per_step_token > 0.0)

    @property
    def needs_prefill(self) -> bool:
        """Whether the delay depends on the prompt's prefill price (the caller prices it only then)."""
        return self.per_prefill_s > 0.0 or self.per_prefill_stream_s > 0.0

    @property
    def at_first_token(self) -> bool:
        return self.path == "first_token"

    def delay_s(self, prompt_tokens: int, streams: int, prefill_s: float = 0.0, step_s: float = 0.0) -> float:
        """Seconds of the delay on the request's path (>= 0); `prefill_s`: the prompt's prefill alone on the idle
        instance; `step_s`: the instance's recent iteration time."""
        return (self.per_request_s + self.per_prompt_token_s * prompt_tokens + self.per_stream_s * streams
                + (self.per_prefill_s + self.per_prefill_stream_s * streams) * prefill_s
                + (self.per_step + self.per_step_token * prompt_tokens) * step_s)
