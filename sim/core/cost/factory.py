"""Builds a pool's pricing: its cost model and memory plan from the model, hardware, formats and deployment.

The cluster calls `build_pool_pricing` once per pool; everything about how an iteration of that pool is priced
(and how much KV it can hold) is decided here, from `conf/cost` and the pool's config (`tp`, `weights_dtype`,
`kv_dtype`, `deployment`). `kv_handoff_s` prices the KV cache moving from a prefill pool to a decode pool.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from calibrate.aic.catalogue import catalogue, choose
from calibrate.efficiency import Generation
from calibrate.profile import Profile, load_profile
from inferplan.config.deployment import Deployment
from inferplan.config.run import CostConfig, PoolConfig
from inferplan.config.specs import HardwareSpec, ModelSpec
from inferplan.errors import InputError
from inferplan.paths import REPO_ROOT
from sim.core.cost.base import CostModel
from sim.core.cost.constant import SyntheticCostModel
from sim.core.cost.layout import build_layout
from sim.core.cost.memory import MemoryPlan, plan_memory
from sim.core.cost.pricer import OpPricer
from sim.core.cost.roofline import LayeredCostModel

PROFILES_DIR = REPO_ROOT / "calibrate" / "profiles"
# Measured per-op latency grids imported from NVIDIA AIConfigurator (`python -m calibrate.import_aic`): one per GPU and
# engine (`<hardware>/<engine>.parquet`); `cost.profile=auto` prices each pool from its hardware's and engine's
# (`choose_profile`; docs/cost-model.md, "Measured grids").
GRID_PROFILES_DIR = PROFILES_DIR / "aic"
# Grid profiles loaded in this process, by path, size and modification time: loading one reads and checks up to
# 400,000 rows (about a second) and its `GridModel` builds each family's interpolation grid on first use (up to a
# second more), so the runs of a sweep or plan share them. A file-load memo (the only one): read-only once loaded
# (the lookups slice them anew), and the one loaded object is what a kept cost model's key compares.
_grids: dict[tuple[str, int, int], Profile] = {}


@dataclass(frozen=True)
class ModelContent:
    """Everything a pool's layered cost model is built from: two models built from equal contents price every
    shape the same (a step's cost depends on its shape alone, the CostModel contract). Compared by value: the
    records are frozen dataclasses of the configuration (a grid profile's measurements compare as the one
    object `_grids` loaded from its file). Not hashed (some records hold dicts): the few kept models are found by
    comparison."""

    model: ModelSpec
    hw: HardwareSpec
    generation: Generation | None
    profile: Profile | None
    efficiency: tuple[tuple[str, float], ...]
    launch_s: float
    efficiency_scale: tuple[tuple[str, float], ...]
    step_overhead_s: float
    link_efficiency: float
    tp: int
    weights_dtype: str
    kv_dtype: str
    role: str
    deployment: Deployment
    where: str


class KeptModels:
    """Cost models kept across runs in one process (a sweep's or the planner's worker runs configuration after
    configuration), by their `ModelContent`: a kept model's priced shapes serve the next run exactly as a fresh
    model would price them (tests/cost/test_kept_models.py). A build-time memo, consulted once per pool per run and
    never while pricing: each kept model's prices live in its own step cache, within that cache's bound
    (`tables.KEPT_VALUES`); at most `bound` models are kept, least recently used dropped first."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.entries: list[tuple[ModelContent, LayeredCostModel]] = []  # least recently used first

    def __len__(self) -> int:
        return len(self.entries)

    def models(self) -> list[LayeredCostModel]:
        return [m for _, m in self.entries]

    def get(self, content: ModelContent) -> LayeredCostModel | None:
        """The model kept for `content` (now the most recently used), or None."""
        for i, (kept, model) in enumerate(self.entries):
            if kept == content:
                self.entries.append(self.entries.pop(i))
                return model
        return None

    def keep(self, content: ModelContent, model: LayeredCostModel) -> None:
        self.entries.append((content, model))
        while len(self.entries) > self.bound:
            self.entries.pop(0)

    def clear(self) -> None:
        self.entries.clear()


KEPT_MODELS = 4
_kept = KeptModels(KEPT_MODELS)


def _grid(path: Path, hardware: str) -> Profile:
    """A grid profile of `hardware`, loaded once per process (`_grids`)."""
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    profile = _grids.get(key)
    if profile is None:
        profile = _grids[key] = load_profile(path, expected_hardware=hardware)
    return profile


def choose_profile(setting: str, hw: HardwareSpec, engine: str = "", engine_version: str = "") -> tuple[Profile | None, str]:
    """The measured profile a pool running engine preset `engine` (its `engine_version`) is priced from, and why
    (a sentence for the run's provenance; "" when none is used):

    * `auto` (the default): the device calibration of the pool's hardware if one was made
      (calibrate/profiles/<hardware>.parquet, `python -m calibrate`: the user's own measurement of their GPU wins),
      else the measured AIConfigurator grid of its hardware and engine (`calibrate.aic.catalogue.choose`: the
      engine's grid at the nearest measured version; a pool naming no engine, or an engine the GPU was not measured
      in, takes the grid of the engine with the most measured rows), else none (analytical);
    * `measured`: that grid only (never a device calibration), else none;
    * `analytical`: none; anything else: a profile's path."""
    if setting == "analytical":
        return None, ""
    if setting == "auto":
        own = PROFILES_DIR / f"{hw.name}.parquet"
        if own.is_file():
            return load_profile(own, expected_hardware=hw.name), f"the device calibration of {hw.name} ({own.name})"
    if setting in ("auto", "measured"):
        choice = choose(catalogue(GRID_PROFILES_DIR, hw.name), engine, engine_version)
        if choice is None:
            return None, ""
        return _grid(choice.grid.path, hw.name), choice.reason
    return load_profile(setting, expected_hardware=hw.name), f"the profile given (cost.profile={setting})"


def default_grid(hardware: str) -> Path:
    """The grid profile file a pool naming no engine preset is priced from on `hardware` (tools and tests)."""
    choice = choose(catalogue(GRID_PROFILES_DIR, hardware), "", "")
    if choice is None:
        raise InputError(str(GRID_PROFILES_DIR), hardware, "no measured grid shipped for this hardware",
                         "import one: python -m calibrate.import_aic <systems> --hardware <name>")
    return choice.grid.path


def resolve_profile(setting: str, hw: HardwareSpec, engine: str = "", engine_version: str = "") -> Profile | None:
    """`choose_profile`'s profile alone."""
    return choose_profile(setting, hw, engine, engine_version)[0]


@dataclass
class PoolPricing:
    """What the simulator needs to price one pool: the iteration cost model, the memory plan (per-instance totals),
    how many devices one instance occupies (billing and energy), and the link a request's KV leaves by in
    prefill/decode disaggregation: it lives on one DP rank (tp devices on each of pp stages), which send their
    shares in parallel over their own NICs."""

    cost: CostModel
    memory: MemoryPlan
    devices_per_instance: int
    kv_link_bytes_per_s: float = 0.0
    kv_link_latency_s: float = 0.0
    deployment: Deployment | None = None

    def kv_transfer_s(self, tokens: int, link_bytes_per_s: float | None = None,
                      latency_s: float | None = None) -> float:
        """Seconds to move `tokens` tokens of this pool's KV cache (one copy, `kv_wire_bytes_per_token` each) over a
        link (default: this pool's `kv_link_bytes_per_s` and `kv_link_latency_s`)."""
        bw = self.kv_link_bytes_per_s if link_bytes_per_s is None else link_bytes_per_s
        lat = self.kv_link_latency_s if latency_s is None else latency_s
        if not bw > 0:
            raise ValueError("no KV link bandwidth: give link_bytes_per_s")
        return lat + tokens * self.memory.kv_wire_bytes_per_token / bw


def kv_handoff_s(prefill: PoolPricing, decode: PoolPricing, tokens: int) -> float:
    """Seconds from a prefill instance finishing a prompt of `tokens` tokens until its KV is in a decode instance:
    the prefill pool's KV bytes (its format) over the slower of the two pools' per-request links, plus the larger
    latency. The decode side converts to its own format on arrival (not priced)."""
    bw = min(prefill.kv_link_bytes_per_s, decode.kv_link_bytes_per_s)
    return prefill.kv_transfer_s(tokens, bw, max(prefill.kv_link_latency_s, decode.kv_link_latency_s))


def build_pool_pricing(model: ModelSpec, hw: HardwareSpec, p: PoolConfig, cost_cfg: CostConfig, *,
                       token_budget: int, where: str, dep: Deployment, profile=None,
                       generation: Generation | None = None, state_seqs: int = 0) -> PoolPricing:
    """The pool's pricing from inputs resolved at load (inferplan/config/run.py `PoolSetup`: the parsed deployment, the
    measured profile or None, the GPU generation's fitted forms or None, the scheduler's most running sequences:
    a sliding-window model's window KV and a linear-attention model's state are reserved for that many); reads no
    files."""
    lay = build_layout(model, dep, where)
    mem = plan_memory(model, hw, dep, lay, kv_dtype=p.kv_dtype, block_size_tokens=p.block_size_tokens,
                      gpu_memory_utilization=p.gpu_memory_utilization, token_budget=token_budget,
                      fixed_reserve_bytes=p.runtime_reserve_bytes, kv_free_fraction=p.kv_free_memory_fraction,
                      sampler_peak_bytes=p.sampler_peak_bytes,
                      activations_in_usable=p.memory_accounting != "static_fraction",
                      state_seqs=state_seqs if model.sliding_window_tokens or model.linear_attention else 0)
    if p.num_gpu_blocks_override is not None:
        blocks = int(p.num_gpu_blocks_override)
        mem = dataclasses.replace(mem, num_blocks=blocks,
                                  kv_capacity_bytes=blocks * p.block_size_tokens * mem.kv_bytes_per_token)
    if not mem.fits:
        fmt = ", ".join(f"{g} {f}" for g, f in dep.weights.items())
        raise InputError(where, "deployment" if p.has_deployment else "tp",
                         f"{model.name} does not fit {lay.devices} x {hw.name} (tp={dep.tp} dp={dep.dp} ep={dep.ep} "
                         f"pp={dep.pp}; weights {fmt}; kv {p.kv_dtype}): {mem.problem}",
                         "raise tp/ep/pp, use smaller weight formats (deployment.weights), offload cold experts "
                         "(deployment.experts.cold_fraction), lower token_budget, or pick larger hardware")
    link = hw.inter_node_bandwidth_bytes_per_s * cost_cfg.link_efficiency * dep.tp * dep.pp
    if cost_cfg.kind == "constant":
        return PoolPricing(SyntheticCostModel(cost_cfg.step_time_s, cost_cfg.per_token_s), mem, dep.devices, link, hw.inter_node_latency_s, dep)
    try:
        pricer = OpPricer(hw, cost_cfg.efficiency, cost_cfg.launch_s, profile, cost_cfg.efficiency_scale,
                          generation)
    except ValueError as err:
        raise InputError("conf/cost", "efficiency_scale", str(err), "give positive multipliers") from None
    cost = _cost_model(model, hw, pricer, p, cost_cfg, dep, where)
    return PoolPricing(cost, mem, dep.devices, link, hw.inter_node_latency_s, dep)


def _cost_model(model: ModelSpec, hw: HardwareSpec, pricer: OpPricer, p: PoolConfig, cost_cfg: CostConfig,
                dep: Deployment, where: str) -> LayeredCostModel:
    """The pool's layered cost model: a kept one built from the same content, else a new one (kept)."""
    content = ModelContent(model, hw, pricer.generation, pricer.profile, tuple(sorted(cost_cfg.efficiency.items())),
                           cost_cfg.launch_s, tuple(sorted(cost_cfg.efficiency_scale.items())),
                           cost_cfg.step_overhead_s, cost_cfg.link_efficiency, p.tp, p.weights_dtype, p.kv_dtype,
                           p.role, dep, where)
    cost = _kept.get(content)
    if cost is None:
        cost = _new_cost_model(model, hw, pricer, p, cost_cfg, dep, where)
        _kept.keep(content, cost)
    return cost


def _new_cost_model(model: ModelSpec, hw: HardwareSpec, pricer: OpPricer, p: PoolConfig, cost_cfg: CostConfig,
                    dep: Deployment, where: str) -> LayeredCostModel:
    return LayeredCostModel(model, hw, pricer, tp=p.tp, weights_dtype=p.weights_dtype, kv_dtype=p.kv_dtype,
                            step_overhead_s=cost_cfg.step_overhead_s, link_efficiency=cost_cfg.link_efficiency,
                            deployment=dep, where=where, role=p.role)


def forget_kept_models() -> None:
    """Drop the cost models kept across runs (tests that compare a fresh model with a kept one)."""
    _kept.clear()
