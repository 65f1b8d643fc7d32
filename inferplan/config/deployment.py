"""A pool's deployment as a record: how one instance spreads the model over devices, and the serving options it
runs with. Parsed from the pool's `deployment:` mapping at load (sim/core/cost/deployment.py `parse_deployment`);
every key, its unit and its default are documented in docs/cost-model.md ("Deployments").
"""
from __future__ import annotations

from dataclasses import dataclass, field

WEIGHT_GROUPS: tuple[str, ...] = ("attention", "ffn", "shared_experts", "experts", "lm_head")
OVERLAPS: tuple[str, ...] = ("none", "two_micro_batches")


@dataclass(frozen=True)
class ExpertOptions:
    """Routed-expert placement and load. Imbalance sources, first match wins: `imbalance` (a measured busiest/mean
    rank load after placement), `load_histogram` (relative load per expert: placed by `sim.core.cost.experts`),
    `zipf_s` (synthetic popularity 1/i^s), else perfectly balanced."""

    redundant: int = 0                           # extra expert replicas per MoE layer (EPLB), spread over EP ranks
    imbalance: float | None = None               # >= 1: busiest EP rank's routed rows / the mean
    load_histogram: tuple[float, ...] | None = None  # one relative load per routed expert
    zipf_s: float | None = None                  # >= 0: expert i (1-based, by popularity) gets load 1/i^s
    statistical_imbalance: bool = True           # add the busiest-of-ep-ranks fluctuation of random routing
    cold_fraction: float = 0.0                   # [0, 1): coldest routed experts kept in host memory
    cold_traffic_share: float | None = None      # share of routings that hit the cold experts


EP_KERNELS = ("generic", "deepep_normal", "deepep_low_latency")


@dataclass(frozen=True)
class CommOptions:
    """Expert-parallel all-to-all formats and how communication overlaps compute."""

    dispatch_dtype: str = "bf16"                 # activations sent to the experts
    combine_dtype: str = "bf16"                  # expert outputs sent back
    overlap: str = "none"                        # none | two_micro_batches
    node_dedup: bool = False                     # one network copy per remote node, then NVLink (DeepEP normal)
    ep_kernel_prefill: str = "generic"           # generic | deepep_normal | deepep_low_latency: EP all-to-all kernels
    ep_kernel_decode: str = "generic"            # ... of steps with / without prefill tokens (sim.core.cost.comm)
    comm_sms: int = 0                            # SMs the communication kernels hold while overlapped (0: none)


@dataclass(frozen=True)
class MtpOptions:
    """Speculative decoding with draft (MTP) modules: `draft_tokens` drafts per step, `acceptance[i]` the
    probability that draft i+1 is accepted given that the ones before it were."""

    draft_tokens: int = 1
    acceptance: tuple[float, ...] = ()

    @property
    def tokens_per_step(self) -> float:
        """Expected tokens a decoding sequence emits per step: 1 + sum_i prod_{j<=i} acceptance[j]."""
        total, p = 1.0, 1.0
        for a in self.acceptance:
            p *= a
            total += p
        return total


@dataclass(frozen=True)
class SparseAttention:
    """Each query attends its `top_k_tokens` highest-scoring context tokens, chosen by a light indexer (MQA with
    `indexer_heads` heads of `indexer_head_dim`, keys cached in `indexer_dtype`) that scores the whole context."""

    top_k_tokens: int = 2048
    indexer_heads: int = 64
    indexer_head_dim: int = 128
    indexer_dtype: str = "fp8_block"


@dataclass(frozen=True)
class HostOptions:
    """Per-iteration host work. Unset values come from the profile's measurement or the documented defaults."""

    cuda_graphs: bool = True                     # iterations up to `cuda_graph_max_tokens` replay a captured graph
    cuda_graph_max_tokens: int = 512             # per DP rank (vLLM's default largest capture size)
    step_overhead_s: float | None = None         # scheduling, sampling, detokenisation per iteration
    kernel_launch_host_s: float | None = None    # CPU time to launch one kernel without graphs


@dataclass(frozen=True)
class Deployment:
    """One instance's layout (tp x dp x pp devices) and options; `weights` maps every WEIGHT_GROUPS entry to a
    format of `calibrate.ops.DTYPES`."""

    tp: int = 1
    dp: int = 1
    ep: int = 1
    pp: int = 1
    pp_micro_batches: int | None = None
    pp_bubble: bool = False
    weights: dict[str, str] = field(default_factory=dict)
    experts: ExpertOptions = ExpertOptions()
    communication: CommOptions = CommOptions()
    mtp: MtpOptions | None = None
    sparse_attention: SparseAttention | None = None
    host: HostOptions = HostOptions()
    preset: str | None = None

    @property
    def devices(self) -> int:
        """Devices one instance occupies (what a pool bills per instance)."""
        return self.tp * self.dp * self.pp

    @property
    def micro_batches(self) -> int:
        """Pipeline micro-batches per iteration (default: one per stage)."""
        return self.pp_micro_batches or self.pp

    @property
    def tokens_per_step(self) -> float:
        return 1.0 if self.mtp is None else self.mtp.tokens_per_step

    @property
    def draft_tokens(self) -> int:
        return 0 if self.mtp is None else self.mtp.draft_tokens
