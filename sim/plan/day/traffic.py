"""The day's traffic, window by window: conversations per second in each window (the scenario's daily curve at the
scenario's day level) and per-request statistics of its conversations (sampled from the scenario's own generator).

Nothing here is fitted to an outcome: the level is the scenario's `mean_rate_per_s` over its `duration_s` (the
token totals' day), the shape its curve, the per-request figures those of the requests it generates.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np

from inferplan.errors import InputError
from scenarios import build_workload
from scenarios.arrivals import rate_curve
from scenarios.arrivals.nhpp import cumulative_rate
from scenarios.config_reader import ConfigReader

WHERE = "scenario traffic (mode=day)"


@dataclass(frozen=True)
class DayCurve:
    """Conversations per second over the day: `rate(t)` for t in [0, duration_s) seconds from the day's start."""

    duration_s: float
    curve_start_s: float
    day_mean_per_s: float
    _base: object
    _scale: float

    def rate(self, t_s: np.ndarray) -> np.ndarray:
        return self._scale * np.asarray(self._base(np.asarray(t_s, dtype=np.float64) + self.curve_start_s))

    def window_mean_per_s(self, start_s: float, length_s: float) -> float:
        _, cum = cumulative_rate(lambda t: self.rate(t + start_s), length_s, 1.0)
        return float(cum[-1] / length_s)


def session_arrivals(traffic: dict) -> dict:
    if traffic.get("kind") != "sessions" or (traffic.get("session_arrivals") or {}).get("kind") != "daily":
        raise InputError(WHERE, "scenario.traffic", "the day plan needs `kind: sessions` with daily session_arrivals",
                         "use scenario=deepseek_v3_day or a scenario of that form")
    sa = traffic["session_arrivals"]
    if sa.get("mean_rate_per_s") is None or float(sa.get("duration_s", 0)) < 3600:
        raise InputError(WHERE, "scenario.traffic.session_arrivals", "needs the day's mean_rate_per_s over a "
                         "duration_s of the whole day", "set duration_s: 86400 and mean_rate_per_s")
    return sa


def day_curve(traffic: dict) -> DayCurve:
    """The scenario's conversation-rate curve, scaled as `daily` scales it (mean over `duration_s`)."""
    sa = session_arrivals(traffic)
    base = rate_curve.from_config(ConfigReader(sa["curve"], file=WHERE, where="session_arrivals.curve"))
    duration, offset = float(sa["duration_s"]), float(sa.get("curve_start_s", 0.0))
    _, cum = cumulative_rate(lambda t: base(t + offset), duration, 1.0)
    mean = float(sa["mean_rate_per_s"])
    return DayCurve(duration, offset, mean, base, mean / float(cum[-1] / duration))


@dataclass(frozen=True)
class RequestStats:
    """Per-request means of the scenario's requests once the prefix cache is warm (an unbounded cache: a block
    hits when an earlier request of the sample held it), and the requests each conversation makes."""

    requests_per_conversation: float
    prompt_tokens: float           # mean input tokens per request (cache hits included)
    cached_tokens: float           # mean of them read from the KV cache
    output_tokens: float
    kv_tokens_per_output_token: float   # mean context a decode step of this traffic attends over
    sample_requests: int
    # [n] per sampled request: new (uncached) prompt tokens and cached ones, for packing prefill batches
    new_tokens: np.ndarray
    hit_tokens: np.ndarray
    since_first_turn_s: np.ndarray   # [n] seconds from the conversation's first request to this one

    @property
    def hit_share(self) -> float:
        return self.cached_tokens / self.prompt_tokens

    def warm_hit_share(self, warmup_s: float) -> float:
        """The hit share a run sees `warmup_s` after it starts (steady traffic): only requests of conversations
        begun since the start exist, i.e. those at most `warmup_s` after their conversation's first turn."""
        seen = self.since_first_turn_s <= warmup_s
        prompt = self.new_tokens[seen] + self.hit_tokens[seen]
        return float(self.hit_tokens[seen].sum() / prompt.sum()) if prompt.sum() else 0.0

    def warmup_s(self, share: float = 0.99) -> float:
        """The warm-up after which a run holds `share` of steady traffic's requests (the others belong to
        conversations begun before the run), in whole minutes."""
        return 60.0 * math.ceil(float(np.quantile(self.since_first_turn_s, share)) / 60.0 - 1e-9)


def request_stats(traffic: dict, seed: int, sample_s: float = 7200.0, sample_rate_per_s: float = 3.0) -> RequestStats:
    """Sample `sample_s` seconds of the scenario's conversations at `sample_rate_per_s` (the per-request figures do
    not depend on the level) and keep the conversations that start in the first `sample_s - 1800` s (later ones
    may be cut by the sample's end)."""
    tr = copy.deepcopy(traffic)
    sa = tr["session_arrivals"]
    sa.update(mean_rate_per_s=sample_rate_per_s)
    sa.pop("window_start_s", None)
    sa.update(window_start_s=0.0, window_s=float(sample_s))
    wl = build_workload(tr, seed)
    hit = np.zeros(len(wl), dtype=np.int64)
    seen: set[int] = set()
    for i, hashes in enumerate(wl.prefix_hashes):
        n = 0
        for h in hashes:
            if int(h) not in seen:
                break
            n += 1
        hit[i] = min(n * wl.hash_block_tokens, int(wl.prompt_tokens[i]) - 1)  # the last token is always computed
        seen.update(int(h) for h in hashes)
    sessions = np.asarray(wl.session_id)
    first_arrival = {}
    for s, t in zip(sessions.tolist(), wl.arrival_s.tolist()):
        first_arrival.setdefault(s, t)
    keep = np.array([first_arrival[s] < sample_s - 1800.0 for s in sessions.tolist()])
    if keep.sum() < 1000:
        raise InputError(WHERE, "sample_s", f"only {int(keep.sum())} requests sampled", "raise sample_s")
    since = np.array([t - first_arrival[s] for s, t in zip(sessions.tolist(), wl.arrival_s.tolist())])[keep]
    prompt = wl.prompt_tokens[keep].astype(np.float64)
    out = wl.output_tokens[keep].astype(np.float64)
    hit = hit[keep]
    return RequestStats(
        requests_per_conversation=float(keep.sum() / len({s for s, k in zip(sessions.tolist(), keep) if k})),
        prompt_tokens=float(prompt.mean()), cached_tokens=float(hit.mean()), output_tokens=float(out.mean()),
        kv_tokens_per_output_token=float((prompt * out + out * (out - 1) / 2).sum() / out.sum()),
        sample_requests=int(keep.sum()),
        new_tokens=(prompt - hit).astype(np.int64), hit_tokens=hit.astype(np.int64), since_first_turn_s=since)
