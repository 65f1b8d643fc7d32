"""The fleet around the instances: pools with cold starts and failures, autoscalers, placement of request classes on
pools, the overload ladder, and the dollars and energy they cost.

Read first: `pool.py` (a pool's instances and their lifecycle), `autoscaler/` (one policy per module),
`placement.py` and `overload.py` (where a new request goes, or why it is turned away), `billing.py` (with the
on-demand, reserved and spot prices), `failures.py` (instances lost and replaced).
"""
