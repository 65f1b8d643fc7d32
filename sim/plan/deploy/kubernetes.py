"""A pool's Kubernetes objects: its instances as a Deployment (one pod per instance), or as a LeaderWorkerSet when
an instance spans several nodes (one pod per node, `size` pods a group); a Service in front of them; and, for
TensorRT-LLM, the ConfigMap holding its extra-options YAML. Each object carries the `inferplan.io/reproduces`
annotation naming the simulated run.

Devices: `nvidia.com/gpu` per pod, and a nodeSelector on the GPU product label NVIDIA's GPU feature discovery
sets (`nvidia.com/gpu.product`); hardware without a known label gets `inferplan.io/hardware: <name>`, a label you
put on the nodes yourself.
"""
from __future__ import annotations

import re

import yaml

from sim.plan.deploy.engines import EXTRA_OPTIONS_PATH, Launch, multinode
from sim.plan.deploy.source import PoolServing

ANNOTATION = "inferplan.io/reproduces"
# conf/hardware name -> `nvidia.com/gpu.product` as GPU feature discovery writes it (the product name nvidia-smi
# reports, spaces as dashes). Assumption per entry: check `kubectl get nodes -L nvidia.com/gpu.product`.
GPU_PRODUCTS = {
    "h100_sxm": "NVIDIA-H100-80GB-HBM3", "h100_pcie": "NVIDIA-H100-PCIe", "h200": "NVIDIA-H200",
    "h800": "NVIDIA-H800", "a100_80gb": "NVIDIA-A100-SXM4-80GB", "a100_pcie": "NVIDIA-A100-80GB-PCIe",
    "a40": "NVIDIA-A40", "l40s": "NVIDIA-L40S",
}
LWS_API = "leaderworkerset.x-k8s.io/v1"


def object_name(pool: str) -> str:
    """A DNS-1123 name for the pool's objects: `inferplan-<pool>` in lower case, `_` as `-`, at most 63 chars."""
    return ("inferplan-" + re.sub(r"[^a-z0-9-]", "-", pool.lower()))[:63].rstrip("-")


def _metadata(s: PoolServing, provenance: str, labels: dict | None = None) -> dict:
    return {"name": object_name(s.name), "labels": {**selector(s), **(labels or {})},
            "annotations": {ANNOTATION: provenance}}


def selector(s: PoolServing) -> dict:
    return {"app.kubernetes.io/name": object_name(s.name), "app.kubernetes.io/part-of": "inferplan"}


def _placement(s: PoolServing) -> tuple[dict, dict]:
    """(resources, nodeSelector) of one pod."""
    hw = s.hardware
    if hw.kind == "gpu" and hw.name in GPU_PRODUCTS:
        gpus = str(s.devices_per_pod)
        return {"limits": {"nvidia.com/gpu": gpus}}, {"nvidia.com/gpu.product": GPU_PRODUCTS[hw.name]}
    if hw.kind == "gpu" and hw.name.startswith("mi"):  # (AMD's device plugin resource)
        return {"limits": {"amd.com/gpu": str(s.devices_per_pod)}}, {"inferplan.io/hardware": hw.name}
    return {}, {"inferplan.io/hardware": hw.name}


def _container(s: PoolServing, launch: Launch, command: list[str]) -> dict:
    resources, _ = _placement(s)
    c = {"name": "engine", "image": launch.image, "command": command,
         "ports": [{"name": "http", "containerPort": launch.port}],
         # (loading weights takes minutes: the startup probe allows 15 min before liveness applies)
         "startupProbe": {"httpGet": {"path": launch.health_path, "port": launch.port}, "periodSeconds": 10,
                          "failureThreshold": 90},
         "readinessProbe": {"httpGet": {"path": launch.health_path, "port": launch.port}, "periodSeconds": 5},
         "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}
    if resources:
        c["resources"] = resources
    if launch.extra_options is not None:
        c["volumeMounts"].append({"name": "extra-options", "mountPath": EXTRA_OPTIONS_PATH.rsplit("/", 1)[0]})
    return c


def _pod_spec(s: PoolServing, launch: Launch, command: list[str]) -> dict:
    _, node_selector = _placement(s)
    # (NCCL and the engines' worker processes share tensors through /dev/shm: the default 64 MiB is too small)
    volumes = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    if launch.extra_options is not None:
        volumes.append({"name": "extra-options", "configMap": {"name": object_name(s.name) + "-options"}})
    return {"nodeSelector": node_selector, "containers": [_container(s, launch, command)], "volumes": volumes}


def deployment(s: PoolServing, launch: Launch, provenance: str) -> dict:
    """One pod per instance; `replicas` the pool's simulated starting count (an autoscaler object moves it)."""
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _metadata(s, provenance),
            "spec": {"replicas": s.instances, "selector": {"matchLabels": selector(s)},
                     "template": {"metadata": {"labels": selector(s)},
                                  "spec": _pod_spec(s, launch, list(launch.argv))}}}


def leader_worker_set(s: PoolServing, launch: Launch, provenance: str) -> dict:
    """One group of `nodes_per_instance` pods per instance (the leader serves, the workers join its ranks)."""
    leader, worker = multinode(launch, s.nodes_per_instance)
    return {"apiVersion": LWS_API, "kind": "LeaderWorkerSet", "metadata": _metadata(s, provenance),
            "spec": {"replicas": s.instances, "leaderWorkerTemplate": {
                "size": s.nodes_per_instance, "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": {"metadata": {"labels": {**selector(s), "role": "leader"}},
                                   "spec": _pod_spec(s, launch, leader)},
                "workerTemplate": {"metadata": {"labels": {**selector(s), "role": "worker"}},
                                   "spec": _pod_spec(s, launch, worker)}}}}


def service(s: PoolServing, launch: Launch, provenance: str) -> dict:
    """A ClusterIP Service on the pods that serve (a LeaderWorkerSet's leaders only)."""
    sel = {**selector(s), **({"role": "leader"} if s.nodes_per_instance > 1 else {})}
    return {"apiVersion": "v1", "kind": "Service", "metadata": _metadata(s, provenance),
            "spec": {"type": "ClusterIP", "selector": sel,
                     "ports": [{"name": "http", "port": launch.port, "targetPort": "http", "protocol": "TCP"}]}}


def options_config_map(s: PoolServing, launch: Launch, provenance: str) -> dict:
    meta = _metadata(s, provenance)
    meta["name"] = object_name(s.name) + "-options"
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
            "data": {EXTRA_OPTIONS_PATH.rsplit("/", 1)[1]: yaml.safe_dump(launch.extra_options, sort_keys=False)}}


def workload_kind(s: PoolServing) -> tuple[str, str]:
    """(apiVersion, kind) of the object holding the pool's instances (what an autoscaler scales)."""
    return (LWS_API, "LeaderWorkerSet") if s.nodes_per_instance > 1 else ("apps/v1", "Deployment")


def pool_objects(s: PoolServing, launch: Launch, provenance: str) -> list[dict]:
    """Every Kubernetes object of the pool, in apply order."""
    out = [options_config_map(s, launch, provenance)] if launch.extra_options is not None else []
    out.append(leader_worker_set(s, launch, provenance) if s.nodes_per_instance > 1
               else deployment(s, launch, provenance))
    out.append(service(s, launch, provenance))
    return out
