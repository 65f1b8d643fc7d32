"""Records of what sits around the pools' instances: cold starts, failures, prices, the overload ladder, rolling
updates, placement routes and scheduled-autoscaler steps. Parsed and checked at load (sim/resolve.py,
sim/failure_config.py); the engine's fleet modules (sim/core/fleet/) run on them.
"""
from __future__ import annotations

from dataclasses import dataclass

# Cold start: how long a new instance takes before it serves, provisioning + weight loading + warm-up. Defaults are
# grounded in the published figures quoted for chunked, pipelined loading of a 175B-parameter model (350 GB in
# fp16): about 22 s with chunked loading against about 180 s without, i.e. about 16 GB/s and 1.9 GB/s of effective
# load bandwidth per instance. Provisioning (acquiring the node, starting the container) and warm-up (CUDA-graph
# capture, first batches) are stated assumptions, overridable per pool.
PLAIN_LOAD_BYTES_PER_S = 350e9 / 180.0    # ~1.94 GB/s: 175B fp16 in ~180 s without chunking (published figure)
CHUNKED_LOAD_BYTES_PER_S = 350e9 / 22.0   # ~15.9 GB/s: the same model in ~22 s with chunked pipelined loading


@dataclass(frozen=True)
class ColdStart:
    """Cold-start model of one pool's instances (seconds)."""

    provision_s: float = 30.0             # assumption: node + container start on a warm cluster
    chunked_loading: bool = True
    load_bytes_per_s: float | None = None  # per instance; default from `chunked_loading` (figures above)
    warmup_s: float = 5.0                  # assumption: CUDA-graph capture and first iterations
    warm_start_s: float = 2.0              # a pre-loaded warm replica only needs to be switched in

    def load_s(self, weight_bytes: float) -> float:
        bw = self.load_bytes_per_s or (CHUNKED_LOAD_BYTES_PER_S if self.chunked_loading else PLAIN_LOAD_BYTES_PER_S)
        return weight_bytes / bw

    def total_s(self, weight_bytes: float, *, provision: bool = True) -> float:
        """Seconds from the request for an instance to its first iteration."""
        return (self.provision_s if provision else 0.0) + self.load_s(weight_bytes) + self.warmup_s


@dataclass(frozen=True)
class OverloadConfig:
    """The overload ladder's thresholds and caps (sim/core/fleet/overload.py), from the scenario's `overload:`."""

    enabled: bool = False
    window_s: float = 30.0
    check_interval_s: float = 1.0
    scale_up_tpot_p99_s: float = 0.050
    fallback_tpot_p99_s: float = 0.080
    breaker_tpot_p99_s: float = 0.120
    release_fraction: float = 0.8
    fallback_pool: str | None = None
    watch_pools: tuple[str, ...] | None = None
    max_queue_per_instance: float | None = None
    min_samples: int = 20   # a P99 over fewer finished requests is not acted on


@dataclass(frozen=True)
class RollingPlan:
    """A scenario's `rolling_update:`, checked at load (sim/resolve.py `rolling_plan`): when, how many at a time, which pools."""

    at_s: float
    wave_size: int
    pools: tuple[str, ...]


@dataclass(frozen=True)
class Route:
    """One entry of `placement.routes`: a request class and its candidate pools, most preferred first."""

    request_class: str
    pools: tuple[str, ...]


@dataclass(frozen=True)
class ClassSlo:
    """One entry of `placement.class_slo` (cost_aware): the windowed P99 bounds a pool must meet for the class
    (None: not checked)."""

    request_class: str
    ttft_p99_s: float | None = None
    tpot_p99_s: float | None = None


@dataclass(frozen=True)
class PlanStep:
    """From `at_s` seconds into the day on, the pool holds `instances` instances."""

    at_s: float
    instances: int


@dataclass(frozen=True)
class FailureAt:
    """A given-time failure of `instances` active instances of a pool (`failures: [{at_s, instances, repair_s}]`).
    `at_peak` (`at_s: peak`): at the start of the workload's busiest bin (`peak_s`); `repair_cold_start`
    (`repair_s: cold_start`): the replacement is asked for one cold start after the failure."""

    at_s: float = 0.0
    instances: int = 1
    repair_s: float = 0.0
    at_peak: bool = False
    repair_cold_start: bool = False


@dataclass(frozen=True)
class FailurePlan:
    """A pool's failures, parsed and checked at load (sim/resolve.py): given times, a random failure rate per
    instance (`mtbf_s` > 0, replaced `repair_s` later), spot interruptions (`spot_mtbf_s` > 0, replaced at once).
    The default plan has none: the pool's instances never fail."""

    given: tuple[FailureAt, ...] = ()
    mtbf_s: float = 0.0
    repair_s: float = 0.0
    spot_mtbf_s: float = 0.0

    @property
    def enabled(self) -> bool:
        return bool(self.given) or self.mtbf_s > 0.0 or self.spot_mtbf_s > 0.0


PRICINGS = ("on_demand", "reserved", "spot")


@dataclass(frozen=True)
class PoolPrice:
    """How a pool's instances are bought (`pricing:`, checked at load by sim/resolve.py): `discount` is the
    fraction taken off the on-demand price (0 <= discount < 1)."""

    kind: str = "on_demand"
    discount: float = 0.0
