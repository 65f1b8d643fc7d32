"""The cluster simulator: one SimPy process per instance, every batch iteration priced by the cost model.

Read first: `run.py` (one simulation end to end), `cluster.py` (pools, routing, arrivals),
`instance/instance.py` with `instance/batching.py` (how iterations form). Data flow:
scenarios.Workload -> cluster (router) -> instance scheduler -> cost model <- calibrate profile -> metrics ->
results folder (docs/results.md).
"""
