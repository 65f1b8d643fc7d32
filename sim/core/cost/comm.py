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
"""
from __future__ import annotations

from dataclasses import dataclass

from calibrate import ops
from inferplan.specs import HardwareSpec
from calibrate.efficiency import Generation


@dataclass(frozen=True)
class Link:
    bytes_per_s: float
    latency_s: float


class Links:
    """The links an instance's collectives use, with `link_efficiency` and the fitted `allreduce` / `all_to_all`
    efficiency scales applied."""

    def __init__(self, hw: HardwareSpec, *, tp: int, ep: int, stage_devices: int, pp: int, link_efficiency: float,
                 scale: dict[str, float], generation: Generation | None = None) -> None:
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

    def allreduce_s(self, nbytes: float) -> float:
        if self.tp <= 1 or nbytes <= 0:
            return 0.0
        ar = self.custom_ar
        if ar is not None and nbytes <= ar.max_bytes:
            return ar.time_s(nbytes / self.ar_scale, self.tp)
        nccl = self.nccl
        if nccl is not None:
            t = nccl.time_s(self.hw.name, self.tp_link_kind, self.tp, nbytes, self.tp_raw_bytes_per_s)
            if t is not None:
                return t
        return ops.allreduce_s(nbytes, self.tp, self.tp_link.bytes_per_s, self.tp_link.latency_s)

    def all_to_all_s(self, rows: float, elem_bytes: float, top_k: int, node_dedup: bool,
                     kernel: str = "generic") -> float:
        """One all-to-all phase moving `rows` rows of `elem_bytes` bytes from/to the busiest device, with the
        deployment's EP kernel (DeepEP figures where the generation has them; else generic)."""
        if self.ep <= 1 or rows <= 0:
            return 0.0
        n, ep = self.node_devices, self.ep
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

    def pp_send_s(self, nbytes: float) -> float:
        if self.pp <= 1 or nbytes <= 0:
            return 0.0
        return self.pp_link.latency_s + nbytes / self.pp_link.bytes_per_s

    def host_fetch_s(self, nbytes: float) -> float:
        return nbytes / self.host_bytes_per_s if nbytes > 0 else 0.0
