"""Routed-expert load: how unevenly EP ranks are loaded, how many experts a batch touches, cold-expert fetches.

* Placement imbalance (busiest rank's routed rows / the mean): a measured value as given, or computed from
  per-expert loads (a measured histogram or a Zipf popularity) by an EPLB-style placement: each redundant replica
  goes to the expert with the highest load per replica, then replicas are packed heaviest first onto the least
  loaded rank that still has a free slot ((E + R) / ep slots per rank). More replicas split the hot experts, so
  the busiest rank's load falls toward the mean.
* Statistical imbalance: even with equal expected loads, routing is random; the busiest of `ep` ranks receiving a
  mean of `mu` rows gets about `mu + sqrt(2 ln ep) sqrt(mu)` (the Gaussian approximation of the largest of `ep`
  Poisson counts), a factor `1 + sqrt(2 ln ep / mu)` that matters for decode's small per-rank batches.
* Cold experts: the coldest `n` experts of each layer live in host memory; a batch of T tokens routing top-k hits a
  given cold expert with probability `1 - (1 - k p)^T`, p its share of the routings.
"""
from __future__ import annotations

import heapq
import math

import numpy as np

from inferplan.config.deployment import ExpertOptions


def expert_loads(opts: ExpertOptions, num_experts: int) -> np.ndarray | None:
    """Relative load per routed expert, normalised to sum 1 (None: uniform, nothing given)."""
    if opts.load_histogram is not None:
        loads = np.asarray(opts.load_histogram, dtype=np.float64)
    elif opts.zipf_s is not None:
        loads = 1.0 / np.arange(1, num_experts + 1, dtype=np.float64) ** opts.zipf_s
    else:
        return None
    return loads / loads.sum()


def placement_imbalance(loads: np.ndarray, ep: int, redundant: int) -> float:
    """Busiest rank's load / mean rank load after replicating and packing `loads` over `ep` ranks (see module)."""
    replicas = np.ones(len(loads), dtype=np.int64)
    heap = [(-float(w), i) for i, w in enumerate(loads)]
    heapq.heapify(heap)
    for _ in range(redundant):
        _, i = heapq.heappop(heap)
        replicas[i] += 1
        heapq.heappush(heap, (-float(loads[i] / replicas[i]), i))
    pieces = sorted(((float(loads[i] / replicas[i]), i) for i in range(len(loads)) for _ in range(replicas[i])),
                    reverse=True)
    slots = len(pieces) // ep
    ranks = [(0.0, r, 0) for r in range(ep)]  # (load, rank, used slots)
    full: list[float] = []
    for w, _ in pieces:
        load, r, used = heapq.heappop(ranks)
        load, used = load + w, used + 1
        if used < slots:
            heapq.heappush(ranks, (load, r, used))
        else:
            full.append(load)
    busiest = max(full + [x[0] for x in ranks])
    return busiest / (float(loads.sum()) / ep)


def base_imbalance(opts: ExpertOptions, num_experts: int, ep: int) -> float:
    """Placement imbalance of an EP deployment (1.0 for ep = 1: one rank holds every expert)."""
    if ep <= 1:
        return 1.0
    if opts.imbalance is not None:
        return opts.imbalance
    loads = expert_loads(opts, num_experts)
    return 1.0 if loads is None else placement_imbalance(loads, ep, opts.redundant)


def statistical_factor(mean_rows: float, ep: int) -> float:
    """Expected busiest / mean rows of `ep` ranks with Poisson loads of mean `mean_rows` (1 for ep = 1)."""
    if ep <= 1 or mean_rows <= 0:
        return 1.0
    return 1.0 + math.sqrt(2.0 * math.log(ep) / mean_rows)


def active_experts(slots: float, num_experts: int, top_k: int, tokens: float) -> float:
    """Expected expert slots (of `slots` held) hit by `tokens` tokens each routed to `top_k` of `num_experts`."""
    if tokens <= 0:
        return 0.0
    return slots * (1.0 - (1.0 - top_k / num_experts) ** tokens)


def cold_traffic_share(opts: ExpertOptions, num_experts: int, cold: int) -> float:
    """Share of routings that go to the `cold` least-loaded experts: as given, from the loads, else cold / E
    (uniform routing: offloading then saves memory at the full price in fetches)."""
    if cold <= 0:
        return 0.0
    if opts.cold_traffic_share is not None:
        return opts.cold_traffic_share
    loads = expert_loads(opts, num_experts)
    if loads is None:
        return cold / num_experts
    return float(np.sort(loads)[:cold].sum())


def expected_cold_hits(cold: int, share: float, top_k: int, tokens: float) -> float:
    """Expected distinct cold experts hit by a batch of `tokens` tokens (each cold expert gets share / cold)."""
    if cold <= 0 or tokens <= 0 or share <= 0:
        return 0.0
    p = min(1.0, top_k * share / cold)
    return cold * (1.0 - (1.0 - p) ** tokens)


def grid_distribution(opts: ExpertOptions, measured: list[str]) -> str:
    """The MoE routing distribution of a measured grid (`balanced`, `power_law_<alpha>`) the deployment's routing
    matches. A synthetic popularity `zipf_s` (1 / i^s over experts by rank, with no measured histogram or
    imbalance given) is a power law: expert loads x then have density falling as x^-(1 + 1/s), so the measured
    `power_law_<alpha>` nearest alpha = 1 + 1/s in log. Assumption: AIConfigurator's power-law tables draw each
    expert's tokens from a density x^-alpha. Everything else (uniform routing; a measured histogram or imbalance,
    which the simulator applies itself as extra rows) is `balanced`."""
    s = opts.zipf_s
    if s is None or s <= 0 or opts.load_histogram is not None or opts.imbalance is not None:
        return "balanced"
    alphas = []
    for name in measured:
        if name.startswith("power_law_"):
            try:
                alphas.append((float(name[len("power_law_"):]), name))
            except ValueError:
                continue
    if not alphas:
        return "balanced"
    want = math.log(1.0 + 1.0 / s)
    return min(alphas, key=lambda a: abs(math.log(a[0]) - want))[1]
