"""Collectives and transfers of one instance, priced over the hardware's links (datasheet x `link_efficiency`).

* TP all-reduce: ring, 2(p-1)/p of the buffer plus 2(p-1) latency hops (`calibrate.ops.allreduce_s`); intra-node
  when tp <= devices_per_node. Where the hardware's generation has a fitted custom all-reduce
  (`calibrate.efficiency.AllReduceForm`, Hopper), intra-node messages up to its `max_bytes` take the faster of
  one-shot and two-shot (as vLLM / SGLang do below their custom all-reduce size limit); larger ones the ring.
  Where it has NCCL segments for this hardware, link and rank count (`calibrate.efficiency.NcclForm`, Ampere:
  fitted on Vidur's A100 tables), those replace the ring: a floor plus the bus bandwidth of each size regime.
* EP kernels (`communication.ep_kernel_prefill` / `ep_kernel_decode`): `generic` = the split below at
  `link_efficiency`; `deepep_normal` = the same split at DeepEP normal kernels' measured fractions of NVLink and
  NIC bandwidth, with node de-duplication; `deepep_low_latency` = DeepEP's low-latency kernels: a fixed latency
  plus all of the busiest device's token copies (rows x bytes) at their measured rate (straight to each expert's
  GPU; the rate was fitted on the same count).
* EP all-to-all (dispatch, then combine): a device sends (or receives, the busier of the two) `rows` hidden
  vectors of `elem_bytes` each. With uniform routing over ep ranks, (n - 1)/ep of them go to the other devices of
  its node (NVLink) and 1 - n/ep to other nodes (the per-device NIC), n = min(ep, devices_per_node); the two links
  run concurrently. With `node_dedup` (DeepEP's normal kernels) a token crosses the network once per distinct
  remote node it routes to, (N - 1)(1 - (1 - 1/N)^k) of N nodes, and is forwarded inside the node over NVLink.
* PP send/recv: a micro-batch's hidden states to the next stage.
* Host fetch: cold expert weights over the device's host link (PCIe), not overlapped (the router decides which
  experts a batch needs only just before they run).

Under a grid profile (`grid`: measured latencies, `sim.core.cost.pricer`) collectives within one node are priced
from its tables, as the engines choose them. TP all-reduce: the engine's custom all-reduce for messages up to
`CUSTOM_ALLREDUCE_MAX_BYTES` (8 MiB), NCCL above: vLLM (`vllm/distributed/device_communicators/
custom_all_reduce.py`, `CustomAllreduce.should_custom_ar`: within one fully NVLink-connected node of 2, 4, 6 or 8
GPUs, messages up to `max_size` = 8 MiB, otherwise `pynccl`) and SGLang (the same module, ported) do this;
TensorRT-LLM's `AllReduceStrategy.AUTO` likewise runs its own one-shot / two-shot kernels for small messages within
a node and NCCL for large ones (assumption: the same 8 MiB switch; its thresholds vary by version and GPU count).
The CUDA-graph captured custom all-reduce in steps that replay a graph, its eager table (where measured; a staging
copy into the registered buffer) in eager steps. EP all-to-all with the `generic` kernel within one node: NCCL
all-to-all of the busiest device's buffer (rows x bytes). DeepEP's kernels (`deepep_normal`, `deepep_low_latency`)
from its dispatch and combine tables, by tokens per rank (the busiest device's routed rows / top-k: its skew
folded into the tokens), hidden size, top-k, experts and EP ranks, which span nodes (the tables measure 1 to 8
nodes of 8 GPUs): each phase in the format the tables moved (dispatch FP8 with block scales, combine BF16),
another format falls back. EP ranks beyond the measured ones, generic all-to-all and TP across nodes (NCCL's
tables are one node), PP sends and host fetches keep the forms above, listed with their reasons.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from calibrate import ops
from calibrate.aic.names import DEEPEP_GPUS_PER_NODE, DEEPEP_PHASES
from inferplan.specs import HardwareSpec
from calibrate.efficiency import Generation

# The custom all-reduce size limit of vLLM and SGLang (`custom_all_reduce.py`, `max_size=8192 * 1024`): larger
# messages, and every message across nodes, go through NCCL (module doc).
CUSTOM_ALLREDUCE_MAX_BYTES = 8 * 1024 * 1024
# NCCL's all-to-all moves bytes without arithmetic: its measured formats by element width (a bf16 or fp8 dispatch
# moves what an fp16 or int8 one does).
_A2A_DTYPE_BY_WIDTH = {1.0: "int8", 2.0: "fp16"}
# The DeepEP kernels of a deployment (`communication.ep_kernel_*`) -> the `kernel` of the measured tables.
DEEPEP_KERNELS = {"deepep_normal": "normal", "deepep_low_latency": "low_latency"}


@dataclass(frozen=True)
class Link:
    bytes_per_s: float
    latency_s: float


class Links:
    """The links an instance's collectives use, with `link_efficiency` and the fitted `allreduce` / `all_to_all`
    efficiency scales applied."""

    def __init__(self, hw: HardwareSpec, *, tp: int, ep: int, stage_devices: int, pp: int, link_efficiency: float,
                 scale: dict[str, float], generation: Generation | None = None, grid: Any = None,
                 moe_shape: tuple[int, int, int] = (0, 0, 0)) -> None:
        self.hw, self.tp, self.ep, self.pp = hw, tp, ep, pp
        self.custom_ar = generation.allreduce if generation is not None and tp <= hw.devices_per_node else None
        self.deepep = generation.all_to_all if generation is not None else None
        self.nccl = generation.nccl if generation is not None else None
        dpn = hw.devices_per_node
        intra = Link(hw.intra_node_bandwidth_bytes_per_s * link_efficiency, hw.intra_node_latency_s)
        inter = Link(hw.inter_node_bandwidth_bytes_per_s * link_efficiency, hw.inter_node_latency_s)
        self.intra, self.inter = intra, inter
        ar = self.ar_scale = scale.get("allreduce", 1.0)
        base = intra if tp <= dpn else inter
        self.tp_link = Link(base.bytes_per_s * ar, base.latency_s)
        self.tp_link_kind = "intra" if tp <= dpn else "inter"
        raw = hw.intra_node_bandwidth_bytes_per_s if tp <= dpn else hw.inter_node_bandwidth_bytes_per_s
        self.tp_raw_bytes_per_s = raw * ar  # (the NCCL segments' bus_eff replaces link_efficiency)
        self.a2a_scale = scale.get("all_to_all", 1.0)
        self.pp_link = intra if stage_devices * pp <= dpn else inter
        self.node_devices = min(ep, dpn)
        self.nodes = max(1.0, ep / dpn)
        self.host_bytes_per_s = hw.host_link_bandwidth_bytes_per_s
        # Measured collectives (a grid profile's `GridLookup`): which all-reduce tables price TP within this node
        # (None: tp = 1, across nodes, or no grid), whether an eager step's custom all-reduce differs from a
        # graphed one's (the layer cache then keys on it), and whether generic all-to-all within a node is measured.
        self.grid = grid
        self._curves: dict[str, Any] = {}  # all-reduce impl or all-to-all format -> the grid's op over its bytes
        self.ar_impls: tuple[str, ...] = ()
        self.eager_differs = False
        self.a2a_grid = False
        if grid is not None:
            if 1 < tp <= dpn:
                self.ar_impls = tuple(i for i in ("custom", "custom_eager", "nccl")
                                      if grid.covers("allreduce", impl=i) and _within(grid, "allreduce", tp, impl=i))
                self.eager_differs = "custom_eager" in self.ar_impls
            self.a2a_grid = 1 < ep <= dpn and _within(grid, "all_to_all", ep, dtype="fp16")
        # DeepEP dispatch / combine: the MoE layer's (hidden, top-k, experts); per (kernel, phase, format) why the
        # tables do not price it ("" where they do) and whether the database measures no such thing at all.
        self.moe_shape = moe_shape
        self._deepep: dict[tuple[str, str, str], tuple[str, bool]] = {}

    def deepep_coverage(self, kernel: str, phase: str, dtype: str) -> tuple[str, bool]:
        """("", False) when the grid prices DeepEP `kernel`'s `phase` ("dispatch" / "combine") moving `dtype` values
        at this EP size, else (why not, whether the database measures no such thing). Kept."""
        key = (kernel, phase, dtype)
        hit = self._deepep.get(key)
        if hit is None:
            hit = self._deepep[key] = self._deepep_coverage(kernel, phase, dtype)
        return hit

    def _deepep_coverage(self, kernel: str, phase: str, dtype: str) -> tuple[str, bool]:
        grid, ep = self.grid, self.ep
        name = DEEPEP_KERNELS.get(kernel, "")
        if grid is None or not name or ep <= 1:
            return "not a DeepEP kernel under a grid profile", False
        op = "deepep_" + phase
        if not grid.covers(op, kernel=name, dtype=DEEPEP_PHASES[op]):  # (`declare` asks whether the database has any)
            return f"no DeepEP {name} {phase} measurements in the grid profile", False
        table = DEEPEP_PHASES[op]
        if ops.check_dtype(dtype)["act_bytes"] != ops.check_dtype(table)["act_bytes"] and not (
                dtype in ("fp8", "fp8_block") and table in ("fp8", "fp8_block")):
            return f"DeepEP {phase} of {dtype} values: the tables measure {table} {phase} only", True
        if self.hw.devices_per_node != DEEPEP_GPUS_PER_NODE:
            return (f"DeepEP measured on nodes of {DEEPEP_GPUS_PER_NODE} GPUs, this hardware has "
                    f"{self.hw.devices_per_node} per node", True)
        counts = grid.gpu_counts(op, kernel=name, dtype=table)
        if not counts or not counts[0] <= ep <= counts[-1]:
            have = f"{counts[0]}-{counts[-1]}" if counts else "no"
            return (f"EP {ep} ({ep / DEEPEP_GPUS_PER_NODE:g} nodes): DeepEP {name} measured on {have} ranks "
                    f"(up to {counts[-1] // DEEPEP_GPUS_PER_NODE if counts else 0} nodes)", True)
        return "", False

    def allreduce_s(self, nbytes: float, graphed: bool = True) -> float:
        """One TP all-reduce of `nbytes` in an iteration that replays a CUDA graph or not (`graphed`)."""
        if self.tp <= 1 or nbytes <= 0:
            return 0.0
        impl = self.allreduce_impl(nbytes, graphed)
        if impl:
            curve = self._curves.get(impl)
            if curve is None:
                curve = self._curves[impl] = self.grid.curve("allreduce", gpus=self.tp, impl=impl)
            return curve(nbytes) / self.ar_scale
        ar = self.custom_ar
        if ar is not None and nbytes <= ar.max_bytes:
            return ar.time_s(nbytes / self.ar_scale, self.tp)
        nccl = self.nccl
        if nccl is not None:
            t = nccl.time_s(self.hw.name, self.tp_link_kind, self.tp, nbytes, self.tp_raw_bytes_per_s)
            if t is not None:
                return t
        return ops.allreduce_s(nbytes, self.tp, self.tp_link.bytes_per_s, self.tp_link.latency_s)

    def allreduce_impl(self, nbytes: float, graphed: bool) -> str:
        """The measured all-reduce table an engine's choice maps to (module doc), or "" (not measured)."""
        impls = self.ar_impls
        if not impls:
            return ""
        if nbytes <= CUSTOM_ALLREDUCE_MAX_BYTES:
            if not graphed and "custom_eager" in impls:
                return "custom_eager"
            if "custom" in impls:
                return "custom"
        return "nccl" if "nccl" in impls else ""

    def all_to_all_s(self, rows: float, elem_bytes: float, top_k: int, node_dedup: bool,
                     kernel: str = "generic", dtype: str = "bf16", phase: str = "") -> float:
        """One all-to-all phase (`phase`: "dispatch" or "combine"; "" unknown) moving `rows` rows of `elem_bytes`
        bytes (values in `dtype`) from/to the busiest device, with the deployment's EP kernel (measured DeepEP
        tables where the grid has them; DeepEP figures where the generation has them; else generic)."""
        if self.ep <= 1 or rows <= 0:
            return 0.0
        n, ep = self.node_devices, self.ep
        if phase and self.grid is not None and kernel != "generic" and not self.deepep_coverage(kernel, phase,
                                                                                                 dtype)[0]:
            ckey = kernel + "/" + phase
            curve = self._curves.get(ckey)
            if curve is None:
                hidden, topk, experts = self.moe_shape
                op = "deepep_" + phase
                curve = self._curves[ckey] = self.grid.curve(op, kernel=DEEPEP_KERNELS[kernel],
                                                             dtype=DEEPEP_PHASES[op], hidden=hidden, topk=topk,
                                                             experts=experts, gpus=ep)
            return curve(rows / top_k) / self.a2a_scale
        if kernel == "generic" and self.a2a_grid:
            nccl = self.a2a_dtype(dtype)
            if nccl:
                curve = self._curves.get(nccl)
                if curve is None:
                    curve = self._curves[nccl] = self.grid.curve("all_to_all", gpus=ep, dtype=nccl)
                return curve(rows * elem_bytes) / self.a2a_scale
        d = self.deepep
        if d is not None and kernel == "deepep_low_latency":
            return d.ll_latency_s + rows * elem_bytes / (d.ll_bytes_per_s * self.a2a_scale)  # (as fitted: every copy)
        if d is not None and kernel == "deepep_normal":
            intra_bw = self.hw.intra_node_bandwidth_bytes_per_s * d.normal_intra_eff * self.a2a_scale
            inter_bw = self.hw.inter_node_bandwidth_bytes_per_s * d.normal_inter_eff * self.a2a_scale
            if ep <= n:
                return (ep - 1) / ep * rows * elem_bytes / intra_bw + self.intra.latency_s
            N = self.nodes
            remote = rows / top_k * (N - 1.0) * (1.0 - (1.0 - 1.0 / N) ** top_k)
            local = rows * (n - 1) / n
            return max(remote * elem_bytes / inter_bw, local * elem_bytes / intra_bw) + self.inter.latency_s
        if ep <= n:
            return (ep - 1) / ep * rows * elem_bytes / (self.intra.bytes_per_s * self.a2a_scale) + self.intra.latency_s
        if node_dedup:
            N = self.nodes
            remote = rows / top_k * (N - 1.0) * (1.0 - (1.0 - 1.0 / N) ** top_k)
            local = rows * (n - 1) / n
        else:
            remote = rows * (1.0 - n / ep)
            local = rows * (n - 1) / ep
        t = max(remote * elem_bytes / self.inter.bytes_per_s, local * elem_bytes / self.intra.bytes_per_s)
        return t / self.a2a_scale + self.inter.latency_s

    def a2a_dtype(self, dtype: str) -> str:
        """The measured NCCL format moving `dtype`'s bytes, or "" (none of that width measured)."""
        width = float(ops.check_dtype(dtype)["act_bytes"])
        nccl = _A2A_DTYPE_BY_WIDTH.get(width, "")
        return nccl if nccl and self.grid.covers("all_to_all", dtype=nccl) else ""

    def declare(self, record: Any, kernels: tuple[str, ...], dtypes: tuple[str, ...], cold_experts: bool) -> None:
        """Under a grid profile, record (`record.measured` / `record.fall_back`, an `OpPricer`) how this instance's
        collectives are priced: a property of the configuration (the message sizes a run meets do not change the
        list), with the reason of each fallback and whether the database measures no such collective at all
        (NCCL and the custom all-reduce are measured within one node; DeepEP on 1 to 8 nodes). `kernels`: the EP
        kernels of the steps the pool runs; `dtypes`: the dispatch and combine formats, in that order."""
        if self.grid is None:
            return
        dpn = self.hw.devices_per_node
        if self.tp > 1:
            if self.tp > dpn:
                record.fall_back("allreduce", "inter_node", f"TP {self.tp} spans nodes: the tables are one node",
                                 True)
            elif not self.ar_impls:
                record.fall_back("allreduce", "intra_node", f"no all-reduce measured for {self.tp} GPUs", True)
            else:
                for impl in self.ar_impls:
                    record.measured.add(("allreduce", impl))
                if "nccl" not in self.ar_impls:
                    record.fall_back("allreduce", "nccl", "messages above 8 MiB: no NCCL all-reduce measured", True)
        if self.ep > 1:
            for kernel in sorted(set(kernels)):
                if kernel != "generic":
                    for phase, dt in zip(("dispatch", "combine"), dtypes):
                        why, absent = self.deepep_coverage(kernel, phase, dt)
                        family = "deepep_normal" if kernel == "deepep_normal" else "deepep_ll"
                        if why and not absent and not record.in_database(family):
                            why, absent = why + f" (the database has no {family} table for this GPU)", True
                        if why:
                            record.fall_back("all_to_all", f"{kernel}_{phase}", why, absent)
                        else:
                            record.measured.add(("all_to_all", f"{kernel}_{phase}"))
                elif self.ep > dpn:
                    record.fall_back("all_to_all", "inter_node", f"EP {self.ep} spans nodes: the tables are one node",
                                     True)
                elif not self.a2a_grid:
                    record.fall_back("all_to_all", "generic", f"no all-to-all measured for {self.ep} GPUs", True)
                else:
                    for dt in sorted(set(dtypes)):
                        if self.a2a_dtype(dt):
                            record.measured.add(("all_to_all", f"nccl_{dt}"))
                        else:
                            record.fall_back("all_to_all", dt, f"no NCCL all-to-all of {dt}-sized values measured",
                                             True)
        if self.pp > 1:
            record.fall_back("pp_send", "bf16", "pipeline send/recv: not in the tables", True)
        if cold_experts:
            record.fall_back("host_fetch", "experts", "cold-expert fetches over the host link: not in the tables",
                             True)

    def pp_send_s(self, nbytes: float) -> float:
        if self.pp <= 1 or nbytes <= 0:
            return 0.0
        return self.pp_link.latency_s + nbytes / self.pp_link.bytes_per_s

    def host_fetch_s(self, nbytes: float) -> float:
        return nbytes / self.host_bytes_per_s if nbytes > 0 else 0.0


def _within(grid: Any, op: str, gpus: int, **cat: Any) -> bool:
    """Whether `gpus` lies within the GPU counts the grid measured `op` on (a blend of neighbouring counts inside
    that range, never beyond it: NVL72-wide TP on a 2-4 GPU table is not a measurement)."""
    counts = grid.gpu_counts(op, **cat)
    return bool(counts) and min(counts) <= gpus <= max(counts)
