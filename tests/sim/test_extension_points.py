"""Extension contracts that say everything (issue 19): a router, a batching policy or an autoscaler is a module,
one registry line and one yaml; the run folder's file names are spelled in one non-test module."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from omegaconf import OmegaConf

from sim.compose import compose_config
from sim.config import load_run_config
from sim.core.fleet.autoscaler import AUTOSCALERS
from sim.core.instance.batching import POLICIES
from sim.core.instance.batching.presets import CONTINUOUS
from sim.core.router import ROUTERS
from sim.simulate import simulate
from tests.sim.helpers import poisson_workload

ROOT = Path(__file__).resolve().parents[2]
SYNTH = ["scenario=smoke", "metrics.progress=false", "cost=constant", "cost.step_time_s=0.01",
         "cost.per_token_s=0", "scenario.frontend_overhead_s=0", "scenario.pools.main.instances=2"]


# -- the throwaway policies: touch point 1, a module (here: this file) ----------------------------------------
class LastInstanceRouter:
    """Always the highest-index eligible instance (so its effect is visible: instance 0 serves nothing)."""

    def __init__(self, bias: int = 0) -> None:
        self.bias = bias

    def route(self, req, instances):
        return instances[-1]


def TinyBatching(kv, *, token_budget: int = 8192):
    """Continuous batching with one sequence at a time (its effect: no two requests overlap on an instance): a
    factory over the `continuous` preset (a real policy lives under sim/core/ and is compiled with the core)."""
    return CONTINUOUS(kv, token_budget=token_budget, max_num_seqs=1)


TinyBatching.whole_prompt_limit = CONTINUOUS.whole_prompt_limit  # type: ignore[attr-defined]


class OneMoreScaler:
    """Wants one instance more than it has, once a simulated second."""

    def __init__(self, interval_s: float = 1.0, context=None) -> None:
        self.interval_s, self.boost = interval_s, False

    def decide(self, now_s: float, pool, monitor) -> int | None:
        return pool.provisioned + 1


def _composed_with(group: str, yaml_content: dict) -> dict:
    """The composed config with `conf/<group>/<name>.yaml` replaced by `yaml_content` (touch point 3: the yaml)."""
    d = OmegaConf.to_container(compose_config(SYNTH), resolve=False)
    d.pop("hydra", None)
    d[group] = dict(yaml_content)
    return d


def test_a_router_is_a_module_a_registry_line_and_a_yaml(monkeypatch):
    monkeypatch.setitem(ROUTERS, "last_instance", LastInstanceRouter)  # touch point 2
    run = load_run_config(_composed_with("router", {"name": "last_instance", "bias": 3}))
    res = simulate(run, poisson_workload(40, 5.0, seed=3))
    served = res.requests["instance"][res.requests["status"] == "completed"]
    assert len(served) == 40 and set(served.tolist()) == {1}


def test_a_batching_policy_is_a_module_a_registry_line_and_a_yaml(monkeypatch):
    monkeypatch.setitem(POLICIES, "tiny", TinyBatching)
    run = load_run_config(_composed_with("batching", {"name": "tiny", "token_budget": 8192}))
    res = simulate(run, poisson_workload(40, 50.0, seed=4))
    req = res.requests
    assert (req["status"] == "completed").all()
    for inst in (0, 1):  # one sequence at a time: on each instance, each request starts after the last ended
        mine = req["instance"] == inst
        first, finish = req["first_token_s"][mine], req["finish_s"][mine]
        order = first.argsort()
        assert (first[order][1:] >= finish[order][:-1] - 1e-12).all()


def test_an_autoscaler_is_a_module_a_registry_line_and_a_yaml(monkeypatch):
    monkeypatch.setitem(AUTOSCALERS, "one_more", OneMoreScaler)
    d = _composed_with("autoscaler", {"name": "one_more", "interval_s": 1.0})
    d["scenario"]["pools"]["main"]["max_instances"] = 3
    res = simulate(load_run_config(d), poisson_workload(200, 20.0, seed=5))
    main = res.summary["pools"]["main"]
    assert (main["instances_start"], main["instances_max"], main["instances_launched"]) == (2, 3, 3)


def test_the_registries_and_the_conf_groups_list_the_same_names():
    for group, registry in (("router", ROUTERS), ("batching", POLICIES), ("autoscaler", AUTOSCALERS)):
        assert sorted(p.stem for p in (ROOT / "conf" / group).glob("*.yaml")) == sorted(registry), group


def _string_constants(path: Path):
    """String literals of a module that are not docstrings (the names code uses, not the prose around it)."""
    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.value


def test_the_run_folder_file_names_are_spelled_in_one_module():
    names = re.compile(r"(?<![\w.])(summary\.json|requests\.parquet|timeseries\.parquet|pools\.parquet)")
    spelled = {}
    for package in ("sim", "dashboard", "bench", "scenarios", "inferplan"):
        for path in (ROOT / package).rglob("*.py"):
            hits = [s for s in _string_constants(path) if names.search(s)]
            if hits:
                spelled[path.relative_to(ROOT).as_posix()] = hits
    assert list(spelled) == ["sim/results/schema.py"], spelled
