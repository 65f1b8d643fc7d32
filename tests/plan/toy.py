"""A planning problem whose answer follows from arithmetic, for the planner's tests.

Traffic: 400 requests arriving every 0.1 s (Gamma renewal with CV 0.01: deterministic to within 1 ms), each with a
16-token prompt and 45 output tokens. Pricing: `cost=constant`, every iteration takes 10 ms whatever it holds. So a
request occupies one batch slot for 45 iterations = 0.45 s (the prefill iteration gives the first token, 44 decode
iterations the rest), and an instance with `max_num_seqs = m` slots serves at most m / 0.45 s requests per second.
Round-robin routing gives each of n instances one request every 0.1 n s.

* m = 1: n instances keep up iff 0.1 n >= 0.45, i.e. n >= 4.5, so **n = 5** (TTFT = one 10 ms iteration). At n = 4
  every request arrives 0.05 s before its instance frees up, so the k-th request on an instance waits 0.05 (k - 1) s:
  with 100 requests each, the P99 TTFT is about 0.05 x 98 = 4.9 s.
* m = 2: keep up iff 0.1 n >= 0.45 / 2, i.e. **n = 3** (TTFT under 20 ms: a prompt waits for the running iteration
  to end). At n = 2 the wait grows by 0.225 - 0.2 = 0.025 s per request: P99 TTFT about 0.025 x 197 = 4.9 s.

With a TTFT P99 target of 1 s, the cheapest fleet is m = 2 with 3 instances (3 x H100 for ~41 s), and the
next-cheaper configuration is m = 2 with 2 instances, failing TTFT P99 by about 3.9 s. Instances are billed per
second for the whole window, so cost grows with n (an overloaded fleet also pays its longer drain).
"""
from __future__ import annotations

TOY = (
    "scenario=smoke", "cost=constant", "cost.step_time_s=0.01", "cost.per_token_s=0",
    "scenario.traffic.kind=gamma", "+scenario.traffic.cv=0.01", "scenario.traffic.rate_per_s=10",
    "scenario.traffic.num_requests=400",
    "~scenario.traffic.lengths", "+scenario.traffic.lengths={kind:fixed,prompt_tokens:16,output_tokens:45}",
    "scenario.frontend_overhead_s=0", "router=round_robin", "scenario.slo.ttft_p99_s=1.0",
)
SEARCH = ("search.scenario.pools.main.instances=range(1,9)", "search.batching.max_num_seqs=[1,2]")
CHOSEN = {"batching.max_num_seqs": 2, "scenario.pools.main.instances": 3}
NEXT_CHEAPER = {"batching.max_num_seqs": 2, "scenario.pools.main.instances": 2}
