"""Iteration pricing: `base.py` (the CostModel protocol), `roofline.py` (layer-by-layer composition), `pricer.py`
(one op from a measured profile or the datasheet roofline), `memory.py` (weights, KV capacity)."""
