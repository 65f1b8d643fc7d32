"""The run's records: one simulation's configuration as the loader (sim/config.py `load_run_config`, with
sim/resolve.py for the file-backed parts) hands it to the engine and to every program.

`RunConfig` holds the scenario, the SLO, the cost model, the metrics settings, each pool's `PoolConfig` (its
scalar settings as configured), each pool's `PoolSetup` (everything it is built from, resolved: specs, engine
preset, scheduler settings with their sources, cold start, deployment, failures, price) and the `FleetSetup`
(router, placement, overload ladder, autoscalers, rolling update). Nothing here is a plain group dict: each block
of the yaml is parsed into a record at load. Where a policy takes a free-form parameter bag (a router's, batching
policy's, autoscaler's or placement's keyword parameters), it is a `Component`: a registry key and a tuple of
(key, value) pairs whose values are scalars or typed records.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from inferplan.config.component import Component
from inferplan.config.deployment import Deployment
from inferplan.config.engine import EnginePreset
from inferplan.config.fleet import ColdStart, FailurePlan, OverloadConfig, PoolPrice, RollingPlan
from inferplan.config.specs import HardwareSpec, ModelSpec


@dataclass(frozen=True)
class PoolConfig:
    """A named group of identical instances (hardware + model + formats + parallelism): the pool's scalar
    settings. Its blocks (autoscaler, cold_start, batching, deployment, engine, failures) are parsed at load into
    the typed parts of its `PoolSetup` and of the `FleetSetup`; `PoolSetup.pool` is this record with an engine
    preset's memory defaults applied."""

    hardware: str
    model: str
    instances: int = 1                      # at the start of the run
    min_instances: int | None = None        # autoscaling bounds; default min(instances, 1) .. 4 x instances
    max_instances: int | None = None
    role: str = "unified"                   # unified | prefill (hands requests to `decode_pool`) | decode
    decode_pool: str | None = None
    batching_policy: str | None = None      # a batching policy for this pool only (default: the batching group)
    tp: int = 1
    weights_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    usd_per_hour: float | None = None       # per instance; default: hardware price x tp
    gpu_memory_utilization: float = 0.9     # vLLM's default fraction of device memory it may use
    kv_free_memory_fraction: float = 1.0    # share of what weights and activations leave that KV takes (TRT-LLM)
    block_size_tokens: int = 16             # vLLM's default KV block size on GPUs
    runtime_reserve_bytes: float = 1.5e9    # per device: CUDA context, NCCL buffers, CUDA graphs (assumption)
    memory_accounting: str = "profiled"     # profiled: activations come out of the usable share; static_fraction:
                                            # they live outside it (SGLang); inferplan/config/engine_memory.py
    sampler_peak_bytes: float = 0.0         # per device: the engine's profile-run sampler peak (vLLM V1), 0: none
    num_gpu_blocks_override: int | None = None  # force the KV capacity per instance (vLLM's option of that name)
    prefix_caching: bool = False            # keep finished prompts' KV blocks for reuse (LRU), vLLM APC / SGLang radix
    kv_tier2_bytes: float = 0.0             # second KV tier per instance (host DRAM or disk); 0 = none
    kv_tier2_bandwidth_bytes_per_s: float | None = None  # load bandwidth from tier 2; default the host link
    kv_tier2_shared: bool = False           # one tier 2 of kv_tier2_bytes for the whole pool (DeepSeek's 3FS KVCache)
    pricing: str = "on_demand"              # on_demand | reserved | spot: the discount off usd_per_hour when billed
    reserved_discount: float | None = None  # default: the scenario's pricing block (conf/config.yaml)
    spot_discount: float | None = None      # default: the scenario's pricing block (conf/config.yaml)
    spot_interruption_mtbf_s: float | None = None  # a spot pool's instances are interrupted at this mean interval
    redundancy: str | None = None           # none | n+1: the planner's headroom check (default: its option)
    has_deployment: bool = False            # the pool gives a `deployment:` (a pool that does not fit names it)


# The blocks of a pool's yaml that are parsed into records of their own rather than `PoolConfig` fields.
POOL_BLOCKS = ("autoscaler", "cold_start", "batching", "deployment", "engine", "failures")


def instance_bounds(p: PoolConfig) -> tuple[int, int]:
    """(min_instances, max_instances) an autoscaler keeps the pool within; defaults min(instances, 1) and
    4 x max(instances, 1)."""
    lo = p.min_instances if p.min_instances is not None else min(p.instances, 1)
    hi = p.max_instances if p.max_instances is not None else max(p.instances, 1) * 4
    return lo, hi


@dataclass(frozen=True)
class ClassTarget:
    """One request class's SLO targets (`slo.classes.<name>`), None where the scenario's apply."""

    request_class: str
    ttft_p99_s: float | None = None
    tpot_p99_s: float | None = None


@dataclass(frozen=True)
class SloConfig:
    ttft_p99_s: float = 2.0
    tpot_p99_s: float = 0.1
    served_fraction: float = 0.9999
    classes: tuple[ClassTarget, ...] = ()   # per request class: targets overriding the above

    def for_class(self, name: str) -> tuple[float, float]:
        for c in self.classes:
            if c.request_class == name:
                return (float(self.ttft_p99_s if c.ttft_p99_s is None else c.ttft_p99_s),
                        float(self.tpot_p99_s if c.tpot_p99_s is None else c.tpot_p99_s))
        return float(self.ttft_p99_s), float(self.tpot_p99_s)


@dataclass(frozen=True)
class PriceSheet:
    """Optional revenue (`price_sheet:`): USD per million input tokens on a prefix-cache hit and on a miss, and
    per million output tokens."""

    usd_per_million_input_tokens_cache_hit: float = 0.0
    usd_per_million_input_tokens_cache_miss: float = 0.0
    usd_per_million_output_tokens: float = 0.0


@dataclass(frozen=True)
class ScenarioConfig:
    """The scenario's own settings. Its pools, SLO, placement, overload ladder, rolling update and pricing defaults
    are parsed into `RunConfig.pools`, `RunConfig.slo`, the `PoolSetup`s and the `FleetSetup`. `traffic` is the
    workload's description as written: the workload loader (scenarios/build.py) reads and checks it."""

    name: str
    traffic: Any
    description: str = ""
    frontend_overhead_s: float = 0.0
    drain_timeout_s: float = 600.0
    load_multiplier: float = 1.0            # scales the arrival rate (thinning below 1, superposition above)
    price_sheet: PriceSheet | None = None   # optional revenue
    billing_granularity_s: float = 1.0
    monitor_window_s: float = 60.0          # window of the P99s autoscalers act on


@dataclass(frozen=True)
class CostConfig:
    kind: str = "roofline"                  # roofline | constant
    step_time_s: float = 0.01               # constant only
    per_token_s: float = 0.0                # constant only
    profile: str = "auto"
    efficiency: dict[str, float] = field(default_factory=dict)        # per op: achieved fraction of peak (str -> number)
    efficiency_scale: dict[str, float] = field(default_factory=dict)  # per op: multiplier on achieved efficiency (fit overlay)
    launch_s: float = 4e-6
    link_efficiency: float = 0.75
    step_overhead_s: float = 2e-3


@dataclass(frozen=True)
class MetricsConfig:
    sample_interval_s: float = 1.0
    progress: bool | str = "auto"           # true | false | auto (a terminal decides)


@dataclass(frozen=True)
class Setting:
    """One scheduler setting of a pool as resolved: its value, the file or block that set it, and the override
    that reaches it ("" where no single override does, e.g. a key of a pool's own engine preset)."""

    key: str
    value: int | float | str | bool | None
    source: str
    override: str = ""


@dataclass(frozen=True)
class SchedulerSettings:
    """A pool's scheduler settings, resolved in one place (sim/resolve.py `scheduler_settings`): the engine
    preset's keys when the pool runs an engine preset (`generic` runs none), else the batching policy's parameters
    (the pool's own `batching:` keys over its policy's group or defaults file). Each setting records its source for
    the review and the deployment validation."""

    policy: str                             # the batching policy's name, or the engine preset's
    settings: tuple[Setting, ...] = ()
    own_engine: bool = False                # the pool names its own engine preset (`engine:` in its block)
    pool_batching: Component = Component("")  # the pool's own `batching:` keys (name: its policy)

    def setting(self, key: str) -> Setting | None:
        for s in self.settings:
            if s.key == key:
                return s
        return None

    def value(self, key: str, default: object = None) -> object:
        s = self.setting(key)
        return default if s is None else s.value


@dataclass(frozen=True)
class PoolSetup:
    """One pool's resolved inputs. `pool` is its config's settings with an engine preset's memory defaults
    applied."""

    pool: PoolConfig
    hardware: HardwareSpec
    model: ModelSpec
    engine: EnginePreset         # the engine preset (`generic`: the batching group decides)
    batching: Component          # the batching policy and its parameters (checked by building it once)
    token_budget: int            # tokens per iteration the memory plan reserves activations for
    cold_start: ColdStart
    deployment: Deployment
    profile: Any                 # calibrate.profile.Profile, or None (analytical)
    generation: Any              # calibrate.efficiency.Generation (the GPU generation's fitted forms), or None
    failures: FailurePlan = FailurePlan()  # when its instances fail (none by default)
    price: PoolPrice = PoolPrice()         # how its instances are bought (on demand by default)
    scheduler: SchedulerSettings = SchedulerSettings("")  # the scheduler's settings and their sources
    profile_choice: str = ""     # why `profile` prices this pool (sim.core.cost.factory.choose_profile)

    @property
    def max_running_seqs(self) -> int:
        """The most sequences the pool's scheduler runs at once (`max_num_seqs`, 0 where its policy has no such
        cap): what a sliding-window model's per-sequence window KV and a linear-attention model's state are
        reserved for."""
        s = self.scheduler.setting("max_num_seqs")
        return int(s.value) if s is not None and isinstance(s.value, (int, float)) and s.value > 0 else 0


@dataclass(frozen=True)
class FleetSetup:
    """What sits above the pools, resolved and checked at load: the router's parameters, the placement policy
    and its routes, the overload ladder, and each pool's autoscaler (name, parameters)."""

    router: Component
    max_outstanding: int | None
    placement: Component
    overload: OverloadConfig
    autoscalers: tuple[tuple[str, Component], ...]  # (pool name, its autoscaler), in the scenario's pool order
    rolling_update: RollingPlan | None = None

    def autoscaler(self, pool: str) -> Component:
        return next(c for name, c in self.autoscalers if name == pool)


@dataclass(frozen=True)
class RunConfig:
    """Everything one simulation needs, validated and resolved at load."""

    seed: int
    scenario: ScenarioConfig
    pools: dict[str, PoolConfig]            # as configured, in the scenario's order
    slo: SloConfig
    batching: Component                     # the batching group: policy and parameters
    router: Component                       # the router group: policy and parameters
    autoscaler: Component                   # the autoscaler group (a pool without its own `autoscaler:` runs it)
    cost: CostConfig
    metrics: MetricsConfig
    setups: dict[str, PoolSetup]            # pool name -> its resolved inputs
    fleet: FleetSetup
    fast_forward: bool = True
    calibration: Any = None                 # a fitted overlay in effect (`sim.validate fit=true`): recorded only

    @property
    def batching_name(self) -> str:
        return self.batching.name

    @property
    def router_name(self) -> str:
        return self.router.name

    @property
    def autoscaler_name(self) -> str:
        return self.autoscaler.name
