"""Engine presets (`conf/engine/<name>.yaml`): an engine's scheduler semantics and memory defaults, as one typed,
frozen `EnginePreset` resolved at load (sim/resolve.py `engine_preset`); what depends on the pool's KV capacity
(known only once its memory plan is built) is a method taking that capacity; the scheduler itself is built per
instance by sim/core/instance/engine.py `build_scheduler`.

A pool takes the `engine` group's preset (default `generic`: the `batching` group decides, as before), or its own
`engine:` (a preset name, or a mapping `{name: <preset>, <key>: <override>...}`). Keys (each yaml names the
engine version and the source of each default):
  max_num_seqs, max_num_batched_tokens, chunked_prefill, iteration, admission, watermark_fraction, preemption,
  num_scheduler_steps, stream_each_step, cuda_graph_sizes {small: [...], step, max}, new_token_ratio_init/min/decay,
  host_per_seq_s, overlap (+ overlap_linear_attention: the engine's own override for models with linear-attention
  layers, `EnginePreset.for_model`), frontend_per_request_s, frontend_per_prompt_token_s, frontend_per_stream_s, frontend_per_prefill_s,
  frontend_per_prefill_stream_s, frontend_per_step, frontend_per_step_token,
  frontend_path (sim/core/instance/frontend.py: the API server's time, before the scheduler or on the first
  token's way to the client), swap_space_gib,
  gpu_memory_utilization (+ gpu_memory_utilization_by_tp, or mem_fraction_rule: the engine's own rule of the
  device's memory and parallel sizes), memory_accounting (`profiled` | `static_fraction`), sampler_bytes_per_logit
  (inferplan/config/engine_memory.py: how much of the device the engine's own code gives the KV cache),
  device_rule (`max_num_batched_tokens` and `cuda_graph_sizes` by the device's memory and tp: SGLang's
  chunked_prefill_size and CUDA-graph batch sizes, inferplan/config/device_defaults.py),
  kv_free_memory_fraction, block_size_tokens, scheduler_per_dp_rank (true: under attention DP each rank runs its own
  scheduler with max_num_batched_tokens and max_num_seqs, so an instance of dp ranks takes dp times both per
  iteration; false, the default: they are the instance's).
Rules for `null`: max_num_batched_tokens -> max(model context, 2048) (vLLM V0 without chunked prefill);
max_num_seqs -> SGLang's max_running_requests rule over the pool's KV tokens (its request-pool cap
`req_pool_cap`, default 5120 as in 0.3.0); gpu_memory_utilization -> the
`_by_tp` entry for the largest tp <= the pool's, else the pool's own value; `mem_fraction_rule`, where given, replaces
both.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from inferplan.config.device_defaults import MIB, chunk_tokens, sglang_graph_sizes
from inferplan.config.engine_memory import sampler_peak_bytes, sglang_mem_fraction_static

POLICY_KEYS = ("max_num_seqs", "max_num_batched_tokens", "chunked_prefill", "iteration", "admission",
               "watermark_fraction", "preemption", "num_scheduler_steps", "stream_each_step", "cuda_graph_sizes",
               "new_token_ratio_init", "new_token_ratio_min", "new_token_ratio_decay", "host_per_seq_s", "overlap",
               "frontend_per_request_s", "frontend_per_prompt_token_s", "frontend_per_stream_s",
               "frontend_per_prefill_s", "frontend_per_prefill_stream_s", "frontend_path", "frontend_per_step",
               "frontend_per_step_token")
# (inputs of rules, not scheduler parameters)
RULE_KEYS = ("req_pool_cap", "overlap_linear_attention", "scheduler_per_dp_rank", "device_rule")
MEMORY_KEYS = ("gpu_memory_utilization", "gpu_memory_utilization_by_tp", "kv_free_memory_fraction",
               "block_size_tokens", "swap_space_gib", "mem_fraction_rule", "memory_accounting",
               "sampler_bytes_per_logit")
DOC_KEYS = ("name", "engine_version")
GENERIC = "generic"


def graph_sizes(rule) -> tuple[int, ...]:
    """Captured decode batch sizes from `{small: [1, 2, 4], step: 8, max: 256}` ({} or null: none)."""
    if not rule:
        return ()
    sizes = set(int(s) for s in rule.get("small", ()))
    step, top = int(rule.get("step", 8)), int(rule.get("max", 0))
    sizes.update(range(step, top + 1, step))
    return tuple(sorted(s for s in sizes if s <= top))


@dataclass(frozen=True)
class EnginePreset:
    """One pool's engine preset, resolved and checked at load (`generic`: no preset, the batching group decides).
    Field names are the yaml keys; defaults are `EngineBatching`'s. `cuda_graph_sizes` is the captured batch
    sizes the yaml's rule expands to; `gpu_memory_utilization_by_tp` is (tp, fraction) pairs in yaml order."""

    name: str = GENERIC
    engine_version: str = ""
    max_num_seqs: int | None = None              # None: SGLang's rule over the pool's KV tokens
    max_num_batched_tokens: int | None = None    # None: max(model context, 2048)
    chunked_prefill: bool = False
    iteration: str = "mixed"
    admission: str = "on_demand"
    watermark_fraction: float = 0.0
    preemption: str = "recompute"
    num_scheduler_steps: int = 1
    stream_each_step: bool = True
    cuda_graph_sizes: tuple[int, ...] = ()
    new_token_ratio_init: float = 0.7
    new_token_ratio_min: float = 0.1
    new_token_ratio_decay: float = 0.001
    host_per_seq_s: float = 0.0
    overlap: str = "none"
    frontend_per_request_s: float = 0.0          # s per request: receive, hand to the engine core, first chunk out
    frontend_per_prompt_token_s: float = 0.0     # s per prompt token: tokenise, hash blocks
    frontend_per_stream_s: float = 0.0           # s per stream the instance holds when the request arrives
    frontend_per_prefill_s: float = 0.0          # s per s of the prompt's own prefill price on the idle instance
    frontend_per_prefill_stream_s: float = 0.0   # s per s of that price per stream the instance holds
    frontend_path: str = "entry"                 # where that delay sits: entry (before the scheduler), first_token
    frontend_per_step: float = 0.0               # iterations (x the instance's recent iteration time) per request
    frontend_per_step_token: float = 0.0         # iterations per prompt token
    swap_space_gib: float = 0.0                  # host swap space per GPU (preemption: swap)
    req_pool_cap: int = 5120                     # requests: the cap of SGLang's request pool (max_num_seqs rule)
    overlap_linear_attention: str | None = None  # `overlap` for models with linear-attention layers (None: same)
    scheduler_per_dp_rank: bool = False          # each attention-DP rank schedules its own batch within the limits
    gpu_memory_utilization: float | None = None  # None: the `_by_tp` entry, else the pool's own value
    gpu_memory_utilization_by_tp: tuple[tuple[int, float], ...] = ()
    kv_free_memory_fraction: float | None = None  # None: 1.0 (all of what weights and activations leave)
    block_size_tokens: int | None = None         # None: the pool's own
    mem_fraction_rule: str | None = None         # the engine's default fraction as a rule (engine_memory.py)
    device_rule: str | None = None               # budget and graph sizes by device (device_defaults.py)
    memory_accounting: str = "profiled"          # profiled: activations out of the fraction; static_fraction: not
    sampler_bytes_per_logit: float = 0.0         # the profile run's sampler peak per logit (vLLM V1), 0: none

    @property
    def generic(self) -> bool:
        return self.name == GENERIC

    def for_model(self, linear_attention: bool) -> EnginePreset:
        """The preset as the engine runs a model with (or without) linear-attention layers: some engines turn
        their overlap scheduler off for such hybrid models (`overlap_linear_attention`)."""
        if linear_attention and self.overlap_linear_attention is not None:
            return replace(self, overlap=self.overlap_linear_attention)
        return self

    def memory_settings(self, tp: int, pool_utilization: float, pool_block_tokens: int, device_bytes: float = 0.0,
                        pp: int = 1, dp: int = 1) -> tuple[float, int]:
        """(gpu_memory_utilization, block_size_tokens) the engine gives a pool of tensor parallelism `tp` (x `dp`
        attention-DP ranks, `pp` stages) on devices of `device_bytes` (0: unknown, the `mem_fraction_rule` unused)."""
        util = self.gpu_memory_utilization
        if self.mem_fraction_rule and device_bytes > 0:
            util = sglang_mem_fraction_static(self.mem_fraction_rule, device_bytes, tp * dp, pp, dp)
        elif util is None:
            fitting = [k for k, _ in self.gpu_memory_utilization_by_tp if k <= tp]
            util = dict(self.gpu_memory_utilization_by_tp)[max(fitting)] if fitting else pool_utilization
        block = self.block_size_tokens
        return float(util), int(block if block is not None else pool_block_tokens)

    def on_device(self, device_bytes: float, tp_size: int) -> EnginePreset:
        """The preset as the engine sets itself up on devices of `device_bytes`, `tp_size` of them per pipeline
        stage (attention-DP ranks included): `device_rule` (SGLang's chunked_prefill_size and CUDA-graph batch sizes
        by device memory and tp) replaces `max_num_batched_tokens` and `cuda_graph_sizes`."""
        if self.device_rule and device_bytes > 0:
            return replace(self, max_num_batched_tokens=chunk_tokens(self.device_rule, device_bytes),
                           cuda_graph_sizes=sglang_graph_sizes(self.device_rule, device_bytes / MIB, tp_size))
        return self

    def sampler_peak_bytes(self, vocab_size: int) -> float:
        """Per device: the peak of the engine's profile-run sampler over a model of `vocab_size` tokens (0: none)."""
        return sampler_peak_bytes(self.sampler_bytes_per_logit, self.max_num_seqs, self.max_num_batched_tokens,
                                  vocab_size)

    def kv_free_fraction(self) -> float:
        """Share of what weights and activations leave that KV takes (TRT-LLM's kv_free_memory_fraction)."""
        return float(self.kv_free_memory_fraction or 1.0)

    def ranks(self, dp: int) -> int:
        """How many schedulers' limits an instance of `dp` attention-DP ranks takes per iteration."""
        return max(1, dp) if self.scheduler_per_dp_rank else 1

    def token_budget(self, max_context_tokens: int, dp: int = 1) -> int:
        """Tokens per iteration of an instance of `dp` DP ranks (`max_num_batched_tokens`, its `null` rule resolved
        for the model's context; per rank when `scheduler_per_dp_rank`)."""
        return int(self.max_num_batched_tokens or max(max_context_tokens, 2048)) * self.ranks(dp)

    def max_seqs(self, max_context_tokens: int, kv_tokens: int, dp: int = 1) -> int:
        """Running sequences at most: the preset's value (per rank when `scheduler_per_dp_rank`), or SGLang's rule
        over the pool's `kv_tokens`."""
        if self.max_num_seqs is not None:
            return self.max_num_seqs * self.ranks(dp)
        pool = min(max(int(kv_tokens / max_context_tokens * 512), 2048), int(self.req_pool_cap or 5120))
        return max(1, min(kv_tokens // 2, pool - 1))
