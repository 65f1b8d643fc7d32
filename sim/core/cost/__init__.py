"""Iteration pricing. Read first: `base.py` (the CostModel protocol), `factory.py` (what the cluster calls:
`build_pool_pricing`), `roofline.py` (an iteration composed from layers for any deployment). Then `layers.py` (one
layer's ops on one device), `pricer.py` (one op from a measured profile, efficiency curves or AIConfigurator latency
grids, or the datasheet roofline), `deployment.py` + `layout.py` (the pool's `deployment:` and where pieces sit),
`memory.py` + `weights.py` (weights, KV capacity), `comm.py` (collectives), `experts.py` (expert load), `host.py`
(host overhead), `host_overlap.py` (what a scheduled iteration adds: KV loads, exposed host work)."""
