"""How long a new instance takes before it serves: provisioning + weight loading + warm-up.

Defaults are grounded in the published figures quoted for chunked, pipelined loading of a 175B-parameter model
(350 GB in fp16): about 22 s with chunked loading against about 180 s without, i.e. about 16 GB/s and 1.9 GB/s
of effective load bandwidth per instance. Provisioning (acquiring the node, starting the container) and warm-up
(CUDA-graph capture, first batches) are stated assumptions, overridable per pool.
"""
from __future__ import annotations

from dataclasses import dataclass

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
