"""What to replay on: the deployment a measured log ran against, as Hydra overrides plus where each value came from.

Precedence for every setting: the command line, then the log (vLLM `--metadata KEY=VALUE`, SGLang
`server_info`, the model id), then a validation default (one instance: a benchmark client talks to one server),
then the scenario. The resolved values and their sources are printed and written to `validation.json`, so an
assumed value is never silent.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from inferplan.config.yaml_files import read_yaml_mapping
from inferplan.errors import InputError
from inferplan.specs import CONF_DIR
from sim.compose import compose_config
from sim.config import RunConfig, load_run_config
from sim.validate.measured import MeasuredRun

SUFFIXES = ("-instruct", "-chat", "-hf", "-it")


def override_key(override: str) -> str:
    """`++scenario.pools.main.tp=2` -> `scenario.pools.main.tp`."""
    return override.split("=", 1)[0].lstrip("+~")


def normalize_model_id(model_id: str) -> str:
    name = model_id.strip().rstrip("/").split("/")[-1].lower().removesuffix("-hf")  # (Llama-2's repository names)
    for s in SUFFIXES:
        if name.endswith(s):
            name = name[: -len(s)]
    return name.removeprefix("meta-")


def model_for_id(model_id: str) -> str | None:
    """The `conf/model` name whose `hf_id` names the same model as `model_id` (instruct/chat variants share shapes)."""
    want = normalize_model_id(model_id)
    for path in sorted((CONF_DIR / "model").glob("*.yaml")):
        hf = read_yaml_mapping(path).get("hf_id")
        if hf and normalize_model_id(str(hf)) == want:
            return path.stem
    return None


def derived_model_yaml(model: str, max_model_len: int, out_dir: Path) -> str:
    """A copy of `conf/model/<model>.yaml` with `max_context_tokens = max_model_len` (vLLM `--max-model-len`),
    written under `out_dir/models/`; returns its path, usable as `scenario.pools.<p>.model=<path>`."""
    src = Path(model) if model.endswith((".yaml", ".yml")) else CONF_DIR / "model" / f"{model}.yaml"
    data = read_yaml_mapping(src)
    data["max_context_tokens"] = int(max_model_len)
    dest = Path(out_dir) / "models" / f"{src.stem}_ctx{int(max_model_len)}.yaml"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(f"# {src} with max_context_tokens set to the served max_model_len (written by sim.validate)\n"
                    + yaml.safe_dump(data, sort_keys=False))
    return str(dest)


@dataclass
class Deployment:
    """The replay's config: the composed, validated run plus the provenance of each deployment value."""

    run: RunConfig
    pool: str
    overrides: list[str]                              # everything passed to compose_config, in order
    sources: dict[str, dict] = field(default_factory=dict)  # setting -> {"value", "source"}

    def describe(self) -> dict:
        return {"scenario": self.run.scenario.name, "pool": self.pool, "settings": self.sources,
                "overrides": self.overrides}


def _truthy(v) -> bool:
    return str(v).strip().lower() in ("1", "true", "yes", "on")


def resolve(measured: MeasuredRun, user_overrides: list[str], out_dir: Path,
            max_model_len: int | None = None) -> Deployment:
    """Compose the replay config for `measured`: log hints and defaults as overrides, the user's on top."""
    user = list(user_overrides)
    user_keys = {override_key(o) for o in user}
    base = compose_config(user)
    scenario = str(base.scenario.name)
    pool = next(iter(base.scenario.pools))
    prefix = f"scenario.pools.{pool}"
    hints = dict(measured.deployment)
    derived: list[str] = []
    sources: dict[str, dict] = {}

    def offer(setting: str, key: str, value, source: str, op: str = "++") -> None:
        if key in user_keys or value is None:
            return
        derived.append(f"{op}{key}={value}")
        sources[setting] = {"value": value, "source": source}

    model, model_src = hints.get("model"), "log (--metadata model=)"
    if model is None and hints.get("model_id"):
        model, model_src = model_for_id(str(hints["model_id"])), f"log (model_id {hints['model_id']!r} matched by hf_id)"
        if model is None:
            sources["model_id"] = {"value": hints["model_id"], "source": "log; no conf/model yaml has this hf_id, "
                                   f"so the scenario's model is used (give {prefix}.model=...)"}
    offer("model", f"{prefix}.model", model, model_src)
    offer("hardware", f"{prefix}.hardware", hints.get("hardware"), "log")
    offer("tp", f"{prefix}.tp", hints.get("tp"), "log")
    offer("instances", f"{prefix}.instances", hints.get("instances", 1),
          "log" if "instances" in hints else "validation default (one server)")
    chunk = hints.get("chunked_prefill_size")
    if "enable_chunked_prefill" in hints:
        offer("batching", "batching", "chunked_prefill" if _truthy(hints["enable_chunked_prefill"]) else "continuous",
              "log", op="")
    elif chunk is not None:
        offer("batching", "batching", "chunked_prefill" if int(chunk) > 0 else "continuous", "log (chunked_prefill_size)", op="")
        if int(chunk) > 0:
            offer("token_budget", "batching.token_budget", int(chunk), "log (chunked_prefill_size)")
    offer("max_num_seqs", "batching.max_num_seqs", hints.get("max_num_seqs"), "log")
    offer("token_budget", "batching.token_budget", hints.get("max_num_batched_tokens"), "log")
    last_send_s = float(measured.arrival_s.max()) if measured.arrival_s is not None else 0.0
    span_s = last_send_s + float(measured.e2e_s.max())
    derived += ["metrics.progress=false", f"++scenario.drain_timeout_s={max(600.0, 10.0 * span_s):.0f}"]
    first = compose_config([*derived, *user])
    mml = max_model_len if max_model_len is not None else hints.get("max_model_len")
    last: list[str] = []  # after the user's overrides: the model copy derives from the final model choice
    if mml is not None:
        src = "command line (max_model_len=)" if max_model_len is not None else "log"
        path = derived_model_yaml(str(first.scenario.pools[pool].model), int(mml), out_dir)
        last.append(f"{prefix}.model={path}")
        sources["max_model_len"] = {"value": int(mml), "source": src}
        if str(first.batching.name) == "continuous" and "batching.token_budget" not in user_keys \
                and "token_budget" not in sources:
            budget = max(int(mml), 2048)
            derived.append(f"++batching.token_budget={budget}")
            sources["token_budget"] = {"value": budget, "source": "vLLM default without chunked prefill: "
                                       "max(max_model_len, 2048)"}
    overrides = [*derived, *user, *last]
    run = load_run_config(compose_config(overrides))
    _fill_sources(run, pool, scenario, sources, user_keys, prefix)
    return Deployment(run=run, pool=pool, overrides=overrides, sources=sources)


def _fill_sources(run: RunConfig, pool: str, scenario: str, sources: dict, user_keys: set, prefix: str) -> None:
    """Record the final value of every deployment setting and mark those not from the log or defaults."""
    p, setup = run.pools[pool], run.setups[pool]
    model = setup.model
    seqs, budget = _scheduler_setting(setup, "max_num_seqs"), _scheduler_setting(setup, "token_budget")
    final = {"model": model.name, "hardware": p.hardware, "tp": p.tp, "instances": p.instances,
             "batching": setup.batching.name,
             "max_num_seqs": None if seqs is None else seqs.value,
             "token_budget": None if budget is None else budget.value, "max_model_len": model.max_context_tokens,
             "weights_dtype": p.weights_dtype, "kv_dtype": p.kv_dtype,
             "gpu_memory_utilization": p.gpu_memory_utilization,
             "step_overhead_s": run.cost.step_overhead_s, "frontend_overhead_s": run.scenario.frontend_overhead_s,
             "efficiency_scale": dict(run.cost.efficiency_scale)}
    keys = {"model": f"{prefix}.model", "hardware": f"{prefix}.hardware", "tp": f"{prefix}.tp",
            "instances": f"{prefix}.instances", "batching": "batching", "max_num_seqs": "batching.max_num_seqs",
            "token_budget": "batching.token_budget", "weights_dtype": f"{prefix}.weights_dtype",
            "kv_dtype": f"{prefix}.kv_dtype", "gpu_memory_utilization": f"{prefix}.gpu_memory_utilization",
            "step_overhead_s": "cost.step_overhead_s", "frontend_overhead_s": "scenario.frontend_overhead_s"}
    for name, setting in (("max_num_seqs", seqs), ("token_budget", budget)):
        if setting is not None and setting.override:
            keys[name] = setting.override.removeprefix("++")
    for setting, value in final.items():
        key = keys.get(setting, "")
        held = {"max_num_seqs": seqs, "token_budget": budget}.get(setting)
        if key in user_keys or any(k.startswith(key + ".") for k in user_keys if key):
            sources[setting] = {"value": value, "source": "command line"}
        elif held is not None and not setup.engine.generic:
            # An engine preset's scheduler runs: its own key sets the value, whatever the log offered the
            # batching group (which does not reach this scheduler).
            sources[setting] = {"value": value, "source": f"engine preset {setup.engine.name} ({held.source})"}
        elif setting in sources:
            sources[setting]["value"] = value
        else:
            sources[setting] = {"value": value, "source": f"assumed (not in the log): scenario {scenario} / "
                                "config defaults"}


def _scheduler_setting(setup, name: str):
    """The pool's resolved scheduler setting behind a deployment setting (`token_budget` is an engine preset's
    `max_num_batched_tokens`), with its source; None where the scheduler has no such setting."""
    key = "max_num_batched_tokens" if name == "token_budget" and not setup.engine.generic else name
    return setup.scheduler.setting(key)


def check_fit_supported(run: RunConfig) -> None:
    if run.cost.kind != "roofline":
        raise InputError("command line", "cost", f"fit=true needs the roofline cost model, got {run.cost.kind!r}",
                         "drop cost=constant")


_NAME = re.compile(r"[^A-Za-z0-9_]+")


def safe_name(text: str) -> str:
    """A Hydra-safe config name from a file stem."""
    return _NAME.sub("_", text).strip("_") or "measured"
