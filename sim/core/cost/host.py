"""Per-iteration host overhead: scheduling, sampling and detokenisation, plus kernel launches when not graphed.

overhead = step_overhead_s + (eager ? max(0, launches x kernel_launch_host_s - GPU time) : 0)

The CPU enqueues kernels asynchronously, so launches cost time only when the CPU falls behind the GPU (small
batches). An iteration replays a CUDA graph (one launch, inside step_overhead_s) when `cuda_graphs` is on and a DP
rank's tokens are at most `cuda_graph_max_tokens`; otherwise it runs eagerly.

Where the numbers come from, first match wins: the deployment's `host:` keys; a measurement in the profile's
metadata under `host_overhead` ({"step_overhead_s": s, "kernel_launch_host_s": s}, written by calibration when it
times a serving loop; the hook is read here, nothing writes it yet); `conf/cost` (`step_overhead_s`) and the
documented default `DEFAULT_KERNEL_LAUNCH_HOST_S`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calibrate.profile import Profile
from inferplan.config.deployment import HostOptions
from inferplan.paths import shown_path

# Assumption: PyTorch eager dispatch plus cudaLaunchKernel costs 5-10 us of CPU per kernel in serving engines
# (docs/cost-model.md); 6 us is used.
DEFAULT_KERNEL_LAUNCH_HOST_S = 6.0e-6
# Kernels per layer for the fused elementwise passes priced as one op (2 RMSNorms with fused residual adds,
# rotary, activation): 4 launches.
ELEMENTWISE_KERNELS = 4


@dataclass(frozen=True)
class HostOverhead:
    step_overhead_s: float
    kernel_launch_host_s: float
    cuda_graphs: bool
    cuda_graph_max_tokens: int
    source: str

    def graphed(self, rank_tokens: float) -> bool:
        return self.cuda_graphs and rank_tokens <= self.cuda_graph_max_tokens

    def seconds(self, launches: float, gpu_s, rank_tokens: float):
        """Host seconds of one iteration (array-valued when `gpu_s` is an array)."""
        if self.graphed(rank_tokens):
            return self.step_overhead_s
        cpu_behind = launches * self.kernel_launch_host_s - gpu_s
        if isinstance(cpu_behind, np.ndarray):
            return self.step_overhead_s + np.maximum(0.0, cpu_behind)
        return self.step_overhead_s + (cpu_behind if cpu_behind > 0.0 else 0.0)

    def describe(self) -> dict:
        return {"step_overhead_s": self.step_overhead_s, "kernel_launch_host_s": self.kernel_launch_host_s,
                "cuda_graphs": self.cuda_graphs, "cuda_graph_max_tokens": self.cuda_graph_max_tokens,
                "source": self.source}


def resolve_host(opts: HostOptions, conf_step_overhead_s: float, profile: Profile | None) -> HostOverhead:
    measured = (profile.provenance.get("host_overhead") if profile is not None else None) or {}
    step, launch, source = conf_step_overhead_s, DEFAULT_KERNEL_LAUNCH_HOST_S, "conf/cost + default"
    if measured:
        assert profile is not None
        step = float(measured.get("step_overhead_s", step))
        launch = float(measured.get("kernel_launch_host_s", launch))
        source = f"profile {shown_path(profile.path)}"
    if opts.step_overhead_s is not None or opts.kernel_launch_host_s is not None:
        source = "deployment.host"
    if opts.step_overhead_s is not None:
        step = opts.step_overhead_s
    if opts.kernel_launch_host_s is not None:
        launch = opts.kernel_launch_host_s
    return HostOverhead(step, launch, opts.cuda_graphs, opts.cuda_graph_max_tokens, source)
