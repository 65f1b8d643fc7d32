"""Turn the What-if page's controls into Hydra overrides on a baseline run, and find the simulator to run them.

The baseline's resolved config (`.hydra/config.yaml`) says where its knobs live: the load is the first key named
like `LOAD_KEYS` (else the single arrival rate, `RATE_KEYS`); a pool's size is the first key named like
`INSTANCE_KEYS` under a mapping named after the pool (or a list item whose `name` is the pool). A knob the config
lacks is not offered, rather than guessed.
Policies are Hydra config groups (`conf/router/*.yaml`, `conf/batching/*.yaml`): the file name is the choice.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import yaml

LOAD_KEYS = ("load_multiplier", "rate_multiplier", "load_scale")
RATE_KEYS = ("rate_per_s", "requests_per_s")
INSTANCE_KEYS = ("instances", "num_instances", "instances_min", "replicas", "count")
POLICY_GROUPS = ("router", "batching")
CONF_DIR = Path("conf")

Runner = Callable[..., Path]


def load_runner() -> tuple[Runner | None, str | None]:
    """`sim.api.run_scenario`, or None and a one-line reason it cannot be used."""
    try:
        module = importlib.import_module("sim.api")
    except ModuleNotFoundError as err:
        return None, (f"the simulator's API is not available ({err}); what-if runs need "
                      "`sim.api.run_scenario` (install inferplan with `pip install -e .`)")
    except Exception as err:  # noqa: BLE001 - a broken simulator import must not take the page down
        return None, f"importing `sim.api` failed: {type(err).__name__}: {err}"
    runner = getattr(module, "run_scenario", None)
    if not callable(runner):
        return None, "`sim.api` has no `run_scenario(scenario, overrides, run_dir, progress)` function"
    return runner, None


def parse_config(text: str | None) -> dict:
    """The baseline's resolved config as a dict ({} when absent or unreadable)."""
    if not text:
        return {}
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return {}
    return value if isinstance(value, dict) else {}


def _walk(node: object, path: tuple[str, ...] = ()):
    """Yield `(path, key, value, parent)` for every entry of nested dicts and lists."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield path, str(k), v, node
            yield from _walk(v, (*path, str(k)))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield path, str(i), v, node
            yield from _walk(v, (*path, str(i)))


def find_load_key(config: dict) -> tuple[str, float] | None:
    """Dotted key that scales the load and its current value: a multiplier if the config has one, else the
    arrival rate when there is exactly one (several rates, e.g. per class, are not scaled here)."""
    def numeric(value) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    for names in (LOAD_KEYS, RATE_KEYS):
        hits = [(".".join((*path, key)), float(value)) for path, key, value, _ in _walk(config)
                if key in names and numeric(value)]
        if len(hits) == 1 or (hits and names is LOAD_KEYS):
            return hits[0]
    return None


def find_pool_keys(config: dict, pools: list[str]) -> dict[str, tuple[str, int]]:
    """For each pool, the dotted key of its instance count and the current count (pools not found are absent)."""
    found: dict[str, tuple[str, int]] = {}
    for path, key, value, _ in _walk(config):
        if not isinstance(value, dict):
            continue
        if key in pools:
            pool = key
        elif key.isdigit() and value.get("name") in pools:  # a list of pools, each with a `name`
            pool = value["name"]
        else:
            continue
        if pool in found:
            continue
        for name in INSTANCE_KEYS:
            count = value.get(name)
            if isinstance(count, int) and not isinstance(count, bool):
                found[pool] = (".".join((*path, key, name)), count)
                break
    return found


LIMIT_KEYS = ("min_instances", "max_instances")


def find_limit_keys(config: dict, pools: list[str]) -> dict[str, dict[str, tuple[str, int]]]:
    """For each pool with an autoscaler, the dotted keys and values of its `min_instances` / `max_instances`."""
    counts = find_pool_keys(config, pools)
    out: dict[str, dict[str, tuple[str, int]]] = {}
    for pool, (key, _) in counts.items():
        prefix = key.rsplit(".", 1)[0]
        node: object = config
        for part in prefix.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or not node.get("autoscaler"):
            continue
        found = {name: (f"{prefix}.{name}", node[name]) for name in LIMIT_KEYS
                 if isinstance(node.get(name), int) and not isinstance(node.get(name), bool)}
        if found:
            out[pool] = found
    return out


def policy_choices(group: str, conf_dir: Path = CONF_DIR) -> list[str]:
    """The choices of a config group: the yaml file names in `conf/<group>/`."""
    folder = Path(conf_dir) / group
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def baseline_choice(run_path: Path, group: str) -> str | None:
    """Which choice of `group` the baseline ran with (Hydra's `runtime.choices` in `.hydra/hydra.yaml`)."""
    hydra_yaml = Path(run_path) / ".hydra" / "hydra.yaml"
    if not hydra_yaml.is_file():
        return None
    try:
        doc = yaml.safe_load(hydra_yaml.read_text()) or {}
    except yaml.YAMLError:
        return None
    choice = (((doc.get("hydra") or {}).get("runtime") or {}).get("choices") or {}).get(group)
    return str(choice) if choice is not None else None


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def build_overrides(baseline: tuple[str, ...] | list[str], changes: dict[str, object],
                    extra: list[str] | None = None) -> list[str]:
    """The baseline's overrides (less `scenario=` and `hydra.*`), then `changes`, then `extra`; later wins per key."""
    merged: dict[str, str] = {}
    for item in (*baseline, *(f"{k}={v}" for k, v in changes.items()), *(extra or [])):
        item = item.strip()
        if not item or "=" not in item:
            continue
        key = _key(item)
        if key == "scenario" or key.startswith("hydra."):
            continue
        merged.pop(key, None)
        merged[key] = item
    return list(merged.values())


def parse_extra(text: str) -> tuple[list[str], list[str]]:
    """Extra overrides typed one per line: `(valid, rejected)`; a valid one looks like `key=value`."""
    valid, rejected = [], []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        (valid if "=" in line and _key(line) else rejected).append(line)
    return valid, rejected


def record_overrides(run_dir: Path, scenario: str, overrides: list[str]) -> None:
    """Write `.hydra/overrides.yaml` as the CLI would, unless the simulator did: a what-if run can then be the
    baseline of the next one and keep these changes."""
    path = Path(run_dir) / ".hydra" / "overrides.yaml"
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump([f"scenario={scenario}", *overrides], default_flow_style=False))


def new_run_dir(root: Path, scenario: str) -> Path:
    """Where a what-if run goes: `<results>/whatif/<scenario>/<timestamp>/` (not yet created)."""
    stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S_%f")
    return Path(root) / "whatif" / scenario / stamp
