"""The deployment folder of a plan's chosen configuration (`python -m sim.plan ... deploy=<dir>`):

    README.md                  what each file is, what it reproduces, what the flags cannot say
    bom.yaml                   bill of materials (bom.py)
    gateway.yaml               placement, router, overload ladder (gateway.py)
    <pool>/launch.sh           the engine launch command (engines.py)
    <pool>/extra-llm-api-options.yaml   TensorRT-LLM only
    <pool>/kubernetes.yaml     Deployment or LeaderWorkerSet, Service (kubernetes.py)
    <pool>/autoscaler.yaml     KEDA ScaledObject, for an autoscaled pool (autoscaling.py)

Every file names the simulated run it reproduces (a comment, and the `inferplan.io/reproduces` annotation).
"""
from __future__ import annotations

import shlex
from pathlib import Path

import yaml

from inferplan.errors import InputError
from sim.compose import compose_config
from sim.config import load_run_config
from sim.plan.deploy import bom as bom_module
from sim.plan.deploy.autoscaling import scaled_object
from sim.plan.deploy.bom import bill_of_materials
from sim.plan.deploy.engines import launch
from sim.plan.deploy.gateway import HEADER as GATEWAY_HEADER, gateway_settings
from sim.plan.deploy.kubernetes import pool_objects
from sim.plan.deploy.source import pool_serving
from sim.results.schema import POOLS, SUMMARY


def _comment(text: str) -> str:
    return "".join(f"# {line}".rstrip() + "\n" for line in text.splitlines())


class _Dumper(yaml.SafeDumper):
    """Safe YAML without anchors and aliases (a repeated block is written out again: manifests stay plain)."""

    def ignore_aliases(self, data) -> bool:
        return True


def _yaml(docs: list[dict], header: str) -> str:
    body = "---\n".join(yaml.dump(d, Dumper=_Dumper, sort_keys=False, width=120) for d in docs)
    return _comment(header) + body


def reproduces(plan: dict, plan_path: Path) -> str:
    """One line naming the simulated run: the plan, the configuration, its run folder and the command that
    re-runs it."""
    c = plan["chosen"]
    run_dir = Path(plan_path).parent / c["run_dir"] if c.get("run_dir") else None
    command = shlex.join(["python", "-m", "sim", *plan["base_overrides"], *c["override_args"]])
    return (f"plan {plan_path} configuration #{c['id']} (config hash {str(c.get('config_hash'))[:16]}), "
            f"run folder {run_dir}; re-run: {command}")


def deployment_files(run, summary: dict | None, pool_rows: dict[str, list[dict]] | None,
                     provenance: str, month: dict | None = None) -> dict[str, str]:
    """Relative path -> text of every file, for a validated `RunConfig` and (optionally) its simulated run's
    `summary.json`, `pools.parquet` rows by pool and the plan's month from the traffic curve (`month`)."""
    sim_pools = (summary or {}).get("pools") or {}
    pools = [pool_serving(run, name, sim_pools.get(name, {}).get("usd_per_instance_hour")) for name in run.pools]
    header = f"Reproduces the simulated {provenance}"
    files: dict[str, str] = {}
    readme = [f"# Deployment of {run.scenario.name}", "", header, "",
              "Files: `bom.yaml` (bill of materials), `gateway.yaml` (placement, router, overload ladder), and per "
              "pool `launch.sh`, `kubernetes.yaml`, `autoscaler.yaml` (autoscaled pools only).", ""]
    ports = {}
    for s in pools:
        lc = launch(s)
        ports[s.name] = lc.port
        notes = "\n".join(f"NOTE: {n}" for n in lc.notes)
        files[f"{s.name}/launch.sh"] = ("#!/bin/sh\n" + _comment(
            f"{header}\nPool {s.name}: {s.model} on {s.devices} x {s.hardware.name}; engine preset "
            f"{s.engine_preset} -> {lc.engine} {lc.version}\n{notes}") + "exec " + lc.shell() + "\n")
        if lc.extra_options is not None:
            files[f"{s.name}/extra-llm-api-options.yaml"] = _yaml([lc.extra_options], header)
        files[f"{s.name}/kubernetes.yaml"] = _yaml(pool_objects(s, lc, provenance), header)
        metrics = lc.engine if lc.engine == "vllm" or (lc.engine == "sglang" and lc.version != "0.3.0") else "gateway"
        so = scaled_object(run, s, metrics, provenance, (pool_rows or {}).get(s.name))
        if so is not None:
            files[f"{s.name}/autoscaler.yaml"] = _yaml([so], header + "\nNeeds KEDA (keda.sh) and Prometheus "
                                                       "scraping the pods; differences: see inferplan.io/differences")
        shape = ("LeaderWorkerSet" if s.nodes_per_instance > 1 else "Deployment")
        readme += [f"## {s.name}", "",
                   f"- {s.instances} x ({s.model}, {s.weights_dtype} weights, {s.kv_dtype} KV) on {s.devices} "
                   f"{s.hardware.name} each ({shape}); {lc.engine} {lc.version} (preset {s.engine_preset})",
                   f"- autoscaler: {'KEDA ScaledObject' if so else 'none (fixed size)'}, "
                   f"{s.min_instances}..{s.max_instances} instances",
                   *(f"- NOTE: {n}" for n in lc.notes), ""]
    files["gateway.yaml"] = _yaml([gateway_settings(run, ports)], header + "\n" + GATEWAY_HEADER)
    bom = bill_of_materials(pools, summary, month)
    files["bom.yaml"] = _yaml([bom], header + "\n" + (bom_module.__doc__ or "").strip())
    month = bom["monthly"]
    readme += ["## Cost", "", f"- fleet $/h at the starting size: {bom['fleet']['usd_per_hour']['start']:,.2f}; "
               f"at the simulated peak: {bom['fleet']['usd_per_hour']['simulated_peak']:,.2f}"]
    if "usd_per_month" in month:
        readme.append(f"- monthly: ${month['usd_per_month']:,.0f} ({month['basis']}; assumptions in bom.yaml)")
        month = month["if_the_window_ran_all_month"]
        if "usd_from_simulated_run" in month:
            readme.append(f"- if the simulated window ran all month: ${month['usd_from_simulated_run']:,.0f} "
                          f"({month['basis']}; not the month)")
    elif "usd_from_simulated_run" in month:
        readme.append(f"- monthly: ${month['usd_from_simulated_run']:,.0f} ({month['basis']})")
    if "caveat" in month:
        readme.append(f"- CAVEAT: {month['caveat']}")
    files["README.md"] = "\n".join(readme) + "\n"
    return files


def _pool_rows(run_dir: Path) -> dict[str, list[dict]]:
    """pools.parquet rows (t_s, starting, active) by pool; empty when the folder has none."""
    path = run_dir / POOLS
    if not path.is_file():
        return {}
    import pyarrow.parquet as pq

    out: dict[str, list[dict]] = {}
    for r in pq.read_table(path, columns=["t_s", "pool", "starting", "active"]).to_pylist():
        out.setdefault(r["pool"], []).append(r)
    return out


def write_deployment(plan: dict, plan_path, out_dir) -> list[Path]:
    """Write the deployment of `plan`'s chosen configuration into `out_dir`; returns the files written."""
    c = plan.get("chosen")
    if not c:
        raise InputError("command line", "deploy", "no configuration meets every SLO", "widen the search")
    plan_path = Path(plan_path)
    run = load_run_config(compose_config([*plan["base_overrides"], *c["override_args"]]))
    run_dir = plan_path.parent / c["run_dir"] if c.get("run_dir") else None
    summary = None
    if run_dir is not None and (run_dir / SUMMARY).is_file():
        from sim.results.read import try_summary
        found = try_summary(run_dir)
        summary = None if found is None else dict(found)
    files = deployment_files(run, summary, _pool_rows(run_dir) if run_dir else None, reproduces(plan, plan_path),
                             c.get("month"))
    out = Path(out_dir)
    written = []
    for rel, text in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if rel.endswith(".sh"):
            path.chmod(0o755)
        written.append(path)
    return written
