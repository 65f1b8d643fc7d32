"""Send times for logs that have none, and the client's `--max-concurrency` semaphore.

vLLM before V26 and every SGLang version store no per-request send time (formats doc §1.3, §2.2). The only way
to replay them is to draw a new schedule from what the log does store: `request_rate` and `burstiness` (gamma
gaps, shape = burstiness; 1 = Poisson) and, where the user put it in `--metadata`, the seed. The draw is a
different realisation from the one the client made (the client's RNG also sampled the dataset), so per-request
errors of such a replay are not meaningful one by one; percentiles are. Every output says which case applies.
"""
from __future__ import annotations

import heapq
import math

import numpy as np

from inferplan.errors import InputError
from sim.validate.measured import MeasuredRun


def scheduled_send_times(n: int, rate_per_s: float, burstiness: float, seed: int, rescaled: bool) -> np.ndarray:
    """The client's schedule for `n` requests [n] (s). inf: all at 0. Otherwise gamma gaps with mean 1/rate:
    V24/V25a and SGLang send the first request at 0 and sleep a fresh gap after each; V25b+ (`rescaled`) draw
    all gaps first and scale the cumulative delays so the last send lands at `n / rate`."""
    if math.isinf(rate_per_s):
        return np.zeros(n)
    rng = np.random.default_rng(seed)
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate_per_s * burstiness), size=n)
    cum = np.cumsum(gaps)
    if rescaled:
        return cum * (n / rate_per_s) / cum[-1]
    return np.concatenate([[0.0], cum[:-1]])


def reconstruct(run: MeasuredRun, seed: int | None = None, rate_per_s: float | None = None) -> MeasuredRun:
    """`run` with `arrival_s` filled in when the log has none (unchanged otherwise). `rate_per_s` overrides the
    log's `request_rate`; `seed` overrides the one from `--metadata seed=...` (default 0)."""
    if run.arrival_s is not None:
        return run
    rate = rate_per_s if rate_per_s is not None else run.client.get("request_rate")
    if rate is None or not rate > 0:
        raise InputError(run.path, "request_rate", "the log has neither per-request send times nor a request rate",
                         "give request_rate=<req/s> (or inf) on the command line")
    burst = float(run.client.get("burstiness") or 1.0)
    if seed is None:
        seed = int(run.client["seed"]) if run.client.get("seed") is not None else 0
    rescaled = bool(run.client.get("rescaled_schedule"))
    sent = scheduled_send_times(run.sent_requests, float(rate), burst, seed, rescaled)
    arrival = sent[run.index]
    arrival = arrival - arrival.min()
    if math.isinf(rate):
        how = "all requests sent at t=0 (request_rate inf)"
    else:
        kind = "Poisson" if burst == 1.0 else f"gamma (burstiness {burst:g})"
        how = (f"reconstructed: {kind} at {rate:g} req/s, seed {seed}"
               + (", cumulative delays rescaled to end at num_prompts/rate (vLLM V25b+)" if rescaled else ""))
    note = f"send times: {how}; the log has none, so per-request errors compare against one random realisation"
    return run.with_(arrival_s=arrival, arrival_source="reconstructed", notes=(*run.notes, note))


def client_send_times(scheduled_s: np.ndarray, e2e_s: np.ndarray, limit: int) -> np.ndarray:
    """Send times under a client semaphore of `limit` in-flight requests [R] (s): request i (in send order) is
    sent at its scheduled time or when the earliest of the in-flight requests completes, whichever is later.
    `e2e_s` are the (simulated) latencies of the requests once sent."""
    send = np.empty_like(scheduled_s)
    done: list[float] = []
    for i, t in enumerate(scheduled_s):
        if len(done) >= limit:
            t = max(t, heapq.heappop(done))
        send[i] = t
        heapq.heappush(done, t + float(e2e_s[i]))
    return send
