"""The cluster simulator: each instance an event-driven loop on SimPy, every batch iteration priced by the cost model.

Read first: `run.py` (one simulation end to end), `cluster.py` (arrivals, overload ladder, placement, hand-offs),
`instance/instance.py` with `instance/batching/` (how iterations form). Data flow:
scenarios.Workload -> cluster -> fleet (pools, autoscalers) -> router -> instance scheduler -> cost model <-
calibrate profile -> metrics -> results folder (docs/results.md). Beside the core: `validate/` (replay a measured
log), `plan/` and `sweep/` (many runs, the cheapest fleet).
"""
from sim.compiled import install_guard

BUILD = install_guard()  # compiled (mypyc) or interpreted, and why: before any compiled module is imported
