"""The simulator core: what one run executes, event by event (arrivals and the prefill/decode hand-off in
`cluster`, `router/`, `instance/` with its batching policies and KV cache, `fleet/` above the instances, `cost/`
pricing each iteration from a profile or the analytical model, `metrics` and `run`). It reads a validated
configuration and a workload and returns a `RunOutcome` of typed records (`outcome`); it never reads files, writes
a run folder or imports the programs built on it (`sim.plan`, `sim.validate`, `sim.sweep`). Those programs import
from here only `outcome`, `pricing` (step and op prices without a simulation), `policies` (a policy's settings
as the engine builds it) and `metrics.percentiles`
(tests/test_layers.py). setup.py compiles every module here."""
