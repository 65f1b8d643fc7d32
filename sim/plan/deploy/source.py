"""What the simulated run assumed of each pool, read from its validated configuration (`load_run_config`: the
pool's settings with its engine preset's memory defaults applied, its batching parameters, its parsed deployment,
its autoscaler): the one record the launch commands, Kubernetes objects and bill of materials are written from."""
from __future__ import annotations

import math
from dataclasses import dataclass


from inferplan.config.yaml_files import read_yaml_mapping
from inferplan.specs import CONF_DIR, HardwareSpec
from sim.config import instance_bounds


@dataclass(frozen=True)
class PoolServing:
    """One pool as the simulation ran it (units in the names; counts per instance unless said otherwise)."""

    name: str
    role: str                         # unified | prefill | decode
    decode_pool: str | None
    hardware: HardwareSpec
    model: str                        # conf/model name
    hf_id: str | None                 # the model's Hugging Face id, when conf/model/<model>.yaml gives one
    max_model_len_tokens: int         # the context the simulation served (the model config's max_context_tokens)
    tp: int
    dp: int
    ep: int
    pp: int
    devices: int                      # devices one instance occupies (tp x dp x pp)
    weights_dtype: str
    kv_dtype: str
    engine_preset: str                # conf/engine name (generic: the batching group decides)
    engine_version: str               # the preset's pinned version ("" for generic)
    batching_policy: str              # conf/batching name the generic engine runs
    max_num_seqs: int | None          # None: the engine's own rule (SGLang's over the KV pool)
    max_num_batched_tokens: int | None
    chunked_prefill: bool
    overlap: str                      # the engine preset's overlap scheduling (none | output | all)
    gpu_memory_utilization: float
    kv_free_memory_fraction: float
    block_size_tokens: int
    num_gpu_blocks_override: int | None
    prefix_caching: bool
    kv_tier2_bytes: float
    kv_tier2_shared: bool             # one tier 2 of kv_tier2_bytes for the whole pool
    draft_tokens: int                 # speculative (MTP) drafts per step; 0: none
    instances: int                    # at the start of the run
    min_instances: int
    max_instances: int
    usd_per_instance_hour: float

    @property
    def nodes_per_instance(self) -> int:
        """Nodes one instance spans: its devices over the hardware's devices per node (8 on an HGX board)."""
        return max(1, math.ceil(self.devices / max(1, self.hardware.devices_per_node)))

    @property
    def devices_per_pod(self) -> int:
        """Devices each pod of an instance holds (an instance spanning nodes is one pod per node)."""
        return self.devices // self.nodes_per_instance


def hf_id(model: str) -> str | None:
    """The `hf_id:` of conf/model/<model>.yaml (the model spec does not keep it); None for a model given by path."""
    path = CONF_DIR / "model" / f"{model}.yaml"
    if not path.is_file():
        return None
    value = read_yaml_mapping(path).get("hf_id")
    return str(value) if value else None


def _batching(setup) -> tuple[int | None, int | None, bool]:
    """(max_num_seqs, max_num_batched_tokens, chunked_prefill) of a pool: its engine preset's when it runs one
    (None where the preset leaves the engine's own rule), else its batching policy's parameters."""
    engine = setup.engine
    if not engine.generic:
        return engine.max_num_seqs, setup.token_budget, bool(engine.chunked_prefill)
    params, name = setup.batching.kwargs(), setup.batching.name
    seqs = params.get("max_num_seqs", params.get("max_batch_size", params.get("batch_size")))
    tokens = params.get("token_budget", params.get("max_batch_tokens"))
    return (None if seqs is None else int(seqs)), (None if tokens is None else int(tokens)), name == "chunked_prefill"


def pool_serving(run, name: str, usd_per_instance_hour: float | None = None) -> PoolServing:
    """Pool `name` of a validated `RunConfig`; `usd_per_instance_hour` as the run billed it (summary.json), else
    the config's price (the pool's `usd_per_hour`, or the hardware's per device)."""
    p, setup = run.pools[name], run.setups[name]
    spec, dep = setup.pool, setup.deployment
    seqs, tokens, chunked = _batching(setup)
    lo, hi = instance_bounds(p)
    if run.fleet.autoscaler(name).name == "fixed":   # (the bounds are an autoscaler's: a fixed pool keeps its size)
        lo = hi = p.instances
    price = usd_per_instance_hour
    if price is None:
        price = p.usd_per_hour if p.usd_per_hour is not None else setup.hardware.usd_per_hour * dep.devices
    return PoolServing(
        name=name, role=p.role, decode_pool=p.decode_pool, hardware=setup.hardware, model=p.model,
        hf_id=hf_id(p.model), max_model_len_tokens=setup.model.max_context_tokens,
        tp=dep.tp, dp=dep.dp, ep=dep.ep, pp=dep.pp, devices=dep.devices,
        weights_dtype=p.weights_dtype, kv_dtype=p.kv_dtype,
        engine_preset=setup.engine.name, engine_version=setup.engine.engine_version,
        batching_policy=setup.batching.name, max_num_seqs=seqs, max_num_batched_tokens=tokens,
        chunked_prefill=chunked, overlap=setup.engine.overlap,
        gpu_memory_utilization=spec.gpu_memory_utilization, kv_free_memory_fraction=spec.kv_free_memory_fraction,
        block_size_tokens=spec.block_size_tokens, num_gpu_blocks_override=spec.num_gpu_blocks_override,
        prefix_caching=spec.prefix_caching, kv_tier2_bytes=spec.kv_tier2_bytes,
        kv_tier2_shared=spec.kv_tier2_shared, draft_tokens=dep.draft_tokens,
        instances=p.instances, min_instances=lo, max_instances=hi, usd_per_instance_hour=float(price))
