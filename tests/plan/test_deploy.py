"""`python -m sim.plan ... deploy=<dir>` (sim/plan/deploy): the manifests are valid Kubernetes objects, every
engine flag is one its pinned version accepts, and the autoscaler object holds the simulated policy's numbers.

Built-in kinds are validated with kubernetes-validate against Kubernetes K8S_VERSION (strict: unknown fields
fail). KEDA's ScaledObject and the LeaderWorkerSet are CRDs it does not ship: each is checked against a minimal
JSON schema of its CRD's required fields and types, written below from the published CRDs (keda.sh_scaledobjects
of KEDA 2.x; leaderworkerset.x-k8s.io_leaderworkersets of LWS v0.6), and the parts they embed from the core API
(the pod templates, the HPA behavior) are validated by kubernetes-validate inside a PodTemplate / an
autoscaling/v2 HorizontalPodAutoscaler.
"""
from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import kubernetes_validate
import pytest
import yaml

from inferplan.errors import InputError
from sim.compose import compose_config
from sim.config import instance_bounds, load_run_config
from sim.plan.deploy import deployment_files
from sim.plan.deploy.accepted import ACCEPTED, TRTLLM_OPTIONS, accepted
from sim.plan.deploy.autoscaling import simulated_policy
from sim.plan.deploy.engines import ENGINES, PRESET_ENGINES, launch
from sim.plan.deploy.source import pool_serving

K8S_VERSION = "1.32.0"
PROVENANCE = "test run"

# keda.sh/v1alpha1 ScaledObject: spec.required [scaleTargetRef, triggers]; scaleTargetRef.required [name];
# triggers[].required [type, metadata] with metadata a string map; metricType enum; replica counts int32.
SCALED_OBJECT = {
    "type": "object", "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "keda.sh/v1alpha1"}, "kind": {"const": "ScaledObject"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {"type": "object", "required": ["scaleTargetRef", "triggers"], "properties": {
            "scaleTargetRef": {"type": "object", "required": ["name"], "properties": {
                "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "name": {"type": "string"}}},
            "pollingInterval": {"type": "integer", "minimum": 0},
            "cooldownPeriod": {"type": "integer", "minimum": 0},
            "minReplicaCount": {"type": "integer", "minimum": 0},
            "maxReplicaCount": {"type": "integer", "minimum": 0},
            "advanced": {"type": "object", "properties": {"horizontalPodAutoscalerConfig": {
                "type": "object", "properties": {"behavior": {"type": "object"}}}}},
            "triggers": {"type": "array", "items": {"type": "object", "required": ["type", "metadata"], "properties": {
                "type": {"type": "string"}, "name": {"type": "string"},
                "metricType": {"enum": ["AverageValue", "Value", "Utilization"]},
                "metadata": {"type": "object", "additionalProperties": {"type": "string"}}}}}}}},
}
# leaderworkerset.x-k8s.io/v1 LeaderWorkerSet: spec.leaderWorkerTemplate.required [workerTemplate]; size >= 1.
LEADER_WORKER_SET = {
    "type": "object", "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "leaderworkerset.x-k8s.io/v1"}, "kind": {"const": "LeaderWorkerSet"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {"type": "object", "required": ["leaderWorkerTemplate"], "properties": {
            "replicas": {"type": "integer", "minimum": 0},
            "leaderWorkerTemplate": {"type": "object", "required": ["workerTemplate"], "properties": {
                "size": {"type": "integer", "minimum": 1},
                "restartPolicy": {"enum": ["RecreateGroupOnPodRestart", "None", "Default"]},
                "leaderTemplate": {"type": "object"}, "workerTemplate": {"type": "object"}}}}}},
}

CASES = {
    "smoke": ["scenario=smoke"],
    "ecommerce_peak": ["scenario=ecommerce_peak"],            # three pools: predictive, reactive, CPU
    "deepseek_v3_day": ["scenario=deepseek_v3_day"],          # instances over 4 and 18 nodes: LeaderWorkerSets
    "trtllm_scheduled": ["scenario=smoke", "engine=trtllm", "autoscaler=scheduled"],
    "sglang_v04_reactive_tp8": ["scenario=smoke", "engine=sglang_v04", "autoscaler=reactive",
                                "+scenario.pools.main.tp=8", "+scenario.pools.main.prefix_caching=true"],
    "vllm_v1_fp8": ["scenario=smoke", "engine=vllm_v1", "+scenario.pools.main.weights_dtype=fp8",
                    "+scenario.pools.main.kv_dtype=fp8"],
    "vllm_v0_predictive": ["scenario=smoke", "engine=vllm_v0", "autoscaler=predictive"],
    "sglang_int4": ["scenario=smoke", "engine=sglang", "+scenario.pools.main.weights_dtype=int4_wo"],
}


def _run(overrides):
    return load_run_config(compose_config(list(overrides)))


@pytest.fixture(scope="module")
def built():
    return {name: (_run(ov), deployment_files(_run(ov), None, None, PROVENANCE)) for name, ov in CASES.items()}


def _docs(files: dict[str, str]) -> list[dict]:
    return [d for rel, text in files.items() if rel.endswith(("kubernetes.yaml", "autoscaler.yaml"))
            for d in yaml.safe_load_all(text) if d]


def _validate_core(doc: dict) -> None:
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def _pod_template(template: dict) -> None:
    _validate_core({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}, "template": template})


@pytest.mark.parametrize("case", CASES)
def test_every_manifest_is_a_valid_object(built, case):
    _, files = built[case]
    docs = _docs(files)
    assert docs
    for doc in docs:
        if doc["kind"] == "ScaledObject":
            jsonschema.validate(doc, SCALED_OBJECT)
            behavior = doc["spec"].get("advanced", {}).get("horizontalPodAutoscalerConfig", {}).get("behavior")
            if behavior:
                _validate_core({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                                "metadata": {"name": "t"}, "spec": {
                                    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "t"},
                                    "minReplicas": 1, "maxReplicas": 2, "behavior": behavior}})
        elif doc["kind"] == "LeaderWorkerSet":
            jsonschema.validate(doc, LEADER_WORKER_SET)
            t = doc["spec"]["leaderWorkerTemplate"]
            _pod_template(t["leaderTemplate"])
            _pod_template(t["workerTemplate"])
        else:
            _validate_core(doc)


def test_an_instance_over_several_nodes_is_a_leader_worker_set(built):
    run, files = built["deepseek_v3_day"]
    for pool, nodes in (("prefill", 4), ("decode", 18)):   # 32 and 144 H800 on 8-GPU nodes
        (lws,) = [d for d in yaml.safe_load_all(files[f"{pool}/kubernetes.yaml"]) if d["kind"] == "LeaderWorkerSet"]
        t = lws["spec"]["leaderWorkerTemplate"]
        assert t["size"] == nodes and lws["spec"]["replicas"] == run.pools[pool].instances
        assert t["workerTemplate"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    (dep,) = [d for d in yaml.safe_load_all(built["smoke"][1]["main/kubernetes.yaml"]) if d["kind"] == "Deployment"]
    assert dep["spec"]["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


def test_every_file_names_the_run_it_reproduces(built):
    for _, files in built.values():
        for rel, text in files.items():
            assert PROVENANCE in text, rel
        for doc in _docs(files):
            assert doc["metadata"]["annotations"]["inferplan.io/reproduces"] == PROVENANCE


@pytest.mark.parametrize("case", CASES)
def test_every_engine_flag_is_one_its_version_accepts(built, case):
    run, _ = built[case]
    for name in run.pools:
        lc = launch(pool_serving(run, name))
        table = accepted(lc.engine, lc.version)
        for flag, value in lc.flags():
            assert flag in table, f"{lc.engine} {lc.version} does not accept {flag}"
            choices = table[flag].choices
            assert choices is None or value in choices, f"{flag} {value} not in {choices}"
        for key, value in _dotted(lc.extra_options or {}).items():
            assert key in TRTLLM_OPTIONS, key
            assert TRTLLM_OPTIONS[key].choices is None or value in TRTLLM_OPTIONS[key].choices


def _dotted(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        out.update(_dotted(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def test_the_registry_covers_every_engine_preset():
    from sim.resolve import engine_presets

    assert set(engine_presets()) <= set(PRESET_ENGINES)
    assert {e for e, _ in PRESET_ENGINES.values()} == set(ENGINES)
    assert {(e, v) for e, v in PRESET_ENGINES.values()} <= set(ACCEPTED)


def _flag(lc, name):
    return dict(lc.flags())[name]


def test_the_flags_are_the_settings_the_simulation_ran():
    run = _run(CASES["sglang_v04_reactive_tp8"])
    s = pool_serving(run, "main")
    lc = launch(s)
    assert (lc.engine, lc.version) == ("sglang", "0.4.0")
    assert _flag(lc, "--tp-size") == "8"
    assert float(_flag(lc, "--mem-fraction-static")) == run.setups["main"].pool.gpu_memory_utilization == 0.81
    assert _flag(lc, "--chunked-prefill-size") == "8192" and "--disable-radix-cache" not in dict(lc.flags())
    run = _run(CASES["vllm_v1_fp8"])
    lc = launch(pool_serving(run, "main"))
    assert (lc.engine, lc.version) == ("vllm", "0.8.5")
    assert _flag(lc, "--max-num-seqs") == "1024" and _flag(lc, "--max-num-batched-tokens") == "8192"
    assert _flag(lc, "--quantization") == "fp8" and _flag(lc, "--kv-cache-dtype") == "fp8"
    assert "--no-enable-prefix-caching" in dict(lc.flags())           # V1 turns it on by default; the pool had none
    run = _run(["scenario=smoke", "batching=chunked_prefill"])       # generic: the batching group's parameters
    lc = launch(pool_serving(run, "main"))
    assert (_flag(lc, "--max-num-batched-tokens"), _flag(lc, "--max-num-seqs")) == ("2048", "256")
    assert _flag(lc, "--enable-chunked-prefill") == "true"
    run = _run(CASES["deepseek_v3_day"])
    lc = launch(pool_serving(run, "decode"))
    assert _flag(lc, "--data-parallel-size") == "144" and "--enable-expert-parallel" in dict(lc.flags())
    assert json.loads(_flag(lc, "--speculative-config")) == {"num_speculative_tokens": 1}
    extra = launch(pool_serving(_run(CASES["trtllm_scheduled"]), "main")).extra_options
    kv = extra["kv_cache_config"]
    assert kv["free_gpu_memory_fraction"] == 0.9 and kv["tokens_per_block"] == 32    # conf/engine/trtllm.yaml


def _scaled(files: dict, pool: str) -> dict:
    return yaml.safe_load(files[f"{pool}/autoscaler.yaml"])


def _thresholds(so: dict) -> dict[str, float]:
    return {t["name"]: float(t["metadata"]["threshold"]) for t in so["spec"]["triggers"] if t["type"] == "prometheus"}


def test_the_reactive_autoscaler_object_is_the_simulated_policy(built):
    run, files = built["ecommerce_peak"]   # l40s_int4: its own block {interval_s 15, step 2, cooldown_s 45, ...}
    so = _scaled(files, "l40s_int4")
    policy = simulated_policy(run, pool_serving(run, "l40s_int4"))
    assert policy.name == "reactive"
    lo, hi = instance_bounds(run.pools["l40s_int4"])
    assert (so["spec"]["minReplicaCount"], so["spec"]["maxReplicaCount"]) == (lo, hi) == (4, 32)
    assert so["spec"]["pollingInterval"] == policy.params["interval_s"] == 15
    th = _thresholds(so)
    assert th["tpot-tpot-p99-s"] == policy.params["tpot_p99_s"] == 0.05
    assert th["waiting-queue-per-instance"] == policy.params["queue_per_instance"] == 4
    assert th["kv-kv-utilization"] == policy.params["kv_utilization"] == 0.9
    assert not any(k.startswith("ttft") for k in th)                  # ttft_p99_s null: not a trigger
    for rule in so["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"].values():
        assert rule["policies"] == [{"type": "Pods", "value": 2, "periodSeconds": 45}]


def test_the_predictive_autoscaler_object_is_the_simulated_policy(built):
    run, files = built["ecommerce_peak"]   # h200_fp8: predictive, 6 req/s per instance, headroom 1.3
    so = _scaled(files, "h200_fp8")
    assert (so["spec"]["minReplicaCount"], so["spec"]["maxReplicaCount"]) == (4, 24)
    assert so["spec"]["pollingInterval"] == 60
    assert _thresholds(so)["request-rate-per-instance"] == pytest.approx(6.0 / 1.3, rel=1e-5)
    assert "2 warm spare(s)" in so["metadata"]["annotations"]["inferplan.io/differences"]


def test_the_predictive_pre_scale_schedule_replays_the_simulated_counts():
    from sim.plan.deploy.autoscaling import clock_origin_s, prescale_segments

    run = _run(CASES["ecommerce_peak"])
    assert clock_origin_s(run) == 70200 + 1500                       # 19:30 curve start + the 19:55 window
    rows = [{"t_s": t, "starting": 0, "active": 6 if t < 120 else 9} for t in range(0, 300, 10)]
    segs = prescale_segments(rows, 71700.0, floor=4)
    assert segs == [(1195, 1197, 6), (1197, 1200, 9)]                 # 19:55-19:57 at 6, 19:57-20:00 at 9
    so = deployment_files(run, None, {"h200_fp8": rows}, PROVENANCE)["h200_fp8/autoscaler.yaml"]
    crons = [t["metadata"] for t in yaml.safe_load(so)["spec"]["triggers"] if t["type"] == "cron"]
    assert crons == [{"timezone": "UTC", "start": "55 19 * * *", "end": "57 19 * * *", "desiredReplicas": "6"},
                     {"timezone": "UTC", "start": "57 19 * * *", "end": "0 20 * * *", "desiredReplicas": "9"}]


def test_the_scheduled_autoscaler_is_cron_triggers_of_its_plan(built):
    run, files = built["trtllm_scheduled"]
    so = _scaled(files, "main")
    crons = [(t["metadata"]["start"], t["metadata"]["end"], int(t["metadata"]["desiredReplicas"]))
             for t in so["spec"]["triggers"]]
    assert crons == [("0 0 * * *", "0 8 * * *", 1), ("0 8 * * *", "0 22 * * *", 2), ("0 22 * * *", "0 0 * * *", 1)]
    assert (so["spec"]["minReplicaCount"], so["spec"]["maxReplicaCount"]) == instance_bounds(run.pools["main"])


def test_a_fixed_pool_has_no_autoscaler_object(built):
    _, files = built["smoke"]
    assert "main/autoscaler.yaml" not in files
    bom = yaml.safe_load(files["bom.yaml"])
    assert bom["pools"]["main"]["instances"] == {"start": 2, "simulated_peak": 2, "min": 2, "max": 2}


def test_the_bill_of_materials_prices_from_the_run_and_states_its_basis():
    run = _run(["scenario=smoke"])
    summary = {"simulated_duration_s": 600.0, "cost": {"usd": 1.0},
               "pools": {"main": {"instances_max": 2, "usd_per_instance_hour": 3.0, "billed_instance_hours": 0.33,
                                  "usd": 1.0}}}
    bom = yaml.safe_load(deployment_files(run, summary, None, PROVENANCE)["bom.yaml"])
    month = bom["monthly"]
    assert month["usd_from_simulated_run"] == pytest.approx(1.0 / 600 * 3600 * 730)
    assert "less than a day" in month["caveat"] and "10-minute window" in month["caveat"]
    assert bom["fleet"]["usd_per_hour"]["start"] == 6.0
    assert bom["fleet"]["devices_by_hardware"]["h100_sxm"]["start"] == 2
    summary["simulated_duration_s"] = 2 * 86400.0
    month = yaml.safe_load(deployment_files(run, summary, None, PROVENANCE)["bom.yaml"])["monthly"]
    assert "caveat" not in month and "2.0-day" in month["basis"]


def test_deploy_from_the_command_line(tmp_path):
    out = tmp_path / "deploy"
    proc = subprocess.run([sys.executable, "-m", "sim.plan", "scenario=smoke", "scenario.traffic.num_requests=200",
                           "search.scenario.pools.main.instances=[1,2]", "jobs=1", f"out_dir={tmp_path / 'p'}",
                           f"cache_dir={tmp_path / 'c'}", f"deploy={out}"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "PASS"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "README.md", "bom.yaml", "gateway.yaml", "main/kubernetes.yaml", "main/launch.sh"]
    plan = json.loads((tmp_path / "p" / "plan.json").read_text())
    assert f"configuration #{plan['chosen']['id']}" in (out / "main" / "launch.sh").read_text()
    assert "less than a day" in (out / "bom.yaml").read_text()


def test_a_moe_tp_x_ep_mix_deploys_where_the_engine_has_the_flag():
    """Experts EP 2 inside TP 4 (each expert split over 2 devices): TensorRT-LLM's --ep_size 2 (its moe_tp_size
    follows as tp_size / ep_size); vLLM's --enable-expert-parallel spreads whole experts over every device, so
    that pool is refused with the fix, never deployed as something else."""
    mix = ["scenario=smoke", "++scenario.pools.main.model=mixtral_8x7b", "++scenario.pools.main.tp=4",
           "++scenario.pools.main.deployment={ep:2}"]
    lc = launch(pool_serving(_run(mix + ["engine=trtllm"]), "main"))
    assert (_flag(lc, "--tp_size"), _flag(lc, "--ep_size")) == ("4", "2")
    with pytest.raises(InputError, match=r"ep=2 of tp x dp = 4 .* has no vLLM flag"):
        launch(pool_serving(_run(mix + ["engine=vllm_v1"]), "main"))
