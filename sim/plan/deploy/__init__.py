"""Deployment output of a plan (`python -m sim.plan ... deploy=<dir>`): the chosen configuration as engine launch
commands, Kubernetes objects, the autoscaler object that enforces the simulated policy, the gateway settings
(placement, router, overload ladder) and a bill of materials, each file naming the simulated run it reproduces.

Read first: `write.py` (the folder, file by file), `source.py` (what the run assumed of each pool), `engines.py`
(flags per engine, the `ENGINES` registry; `accepted.py` the flags each version accepts). Around them:
`kubernetes.py` (Deployment / LeaderWorkerSet, Service), `autoscaling.py` (KEDA ScaledObject), `gateway.py`,
`bom.py`.
"""
from sim.plan.deploy.write import deployment_files, write_deployment

__all__ = ["deployment_files", "write_deployment"]
