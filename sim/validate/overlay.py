"""Fitted values as a Hydra config overlay that later runs apply, and reading one back.

`write_overlay` writes, under the output folder:
* `conf/overlay/<name>.yaml` — a `# @package _global_` config group entry. Apply it to any run with
  `python -m sim --config-dir <out>/conf +overlay=<name> scenario=<s>` (Hydra adds the folder to its search
  path; `+overlay=` appends the entry after the scenario, so its values win; the flag goes before the
  overrides, as argparse wants).
* `overlay.args` — the same values as one line of Hydra overrides, for `python -m sim scenario=<s> $(cat overlay.args)`
  or `sim.api.run_scenario(..., overrides)`.
Both carry a `calibration` block (name, source log, held-out error) when the simulator records overlays
(`core_records_overlay()`); otherwise only the values, and the run's outputs cannot say an overlay was applied.
"""
from __future__ import annotations

from pathlib import Path

import yaml

from inferplan.config.yaml_files import read_yaml
from inferplan.errors import InputError
from sim.compose import compose_config
from sim.config import load_run_config
from sim.validate.replay import ResidualParams

GROUP = "overlay"


def core_records_overlay() -> bool:
    """True when `load_run_config` accepts a top-level `calibration` block (the key the simulator records in
    summary.json and prints); see docs/validation.md "Core support"."""
    cfg = compose_config(["metrics.progress=false"])
    cfg["calibration"] = {"name": "probe"}
    try:
        load_run_config(cfg)
    except InputError as err:
        if err.field == "calibration":
            return False
        raise
    return True


def overlay_values(params: ResidualParams) -> dict:
    """The config keys the fit sets, nested as in the composed config."""
    return {"cost": {"step_overhead_s": float(params.step_overhead_s),
                     "efficiency_scale": {op: float(v) for op, v in params.efficiency_scale().items()}},
            "scenario": {"frontend_overhead_s": float(params.frontend_overhead_s)}}


def _flatten(d: dict, prefix: str = "") -> list[tuple[str, object]]:
    out = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        out += _flatten(v, key + ".") if isinstance(v, dict) else [(key, v)]
    return out


def as_overrides(values: dict) -> list[str]:
    """`++key=value` overrides (force-add: the keys may or may not exist in the scenario)."""
    return [f"++{k}={v!r}" if isinstance(v, str) else f"++{k}={v}" for k, v in _flatten(values)]


def write_overlay(params: ResidualParams, out_dir: Path, name: str, calibration: dict) -> dict[str, str]:
    """Write the overlay files; returns {"yaml", "args", "apply"} (paths and the command to apply it)."""
    out_dir = Path(out_dir)
    values = overlay_values(params)
    if core_records_overlay():
        values["calibration"] = {"name": name, **calibration}
    conf_dir = out_dir.resolve() / "conf"
    path = conf_dir / GROUP / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    apply = f"python -m sim --config-dir {conf_dir} +{GROUP}={name} scenario=<scenario>"
    header = (f"# @package _global_\n# Calibration overlay fitted by `python -m sim.validate` on "
              f"{calibration.get('measured', '?')}.\n# Apply: {apply}\n")
    path.write_text(header + yaml.safe_dump(values, sort_keys=False))
    args = out_dir / "overlay.args"
    args.write_text(" ".join(as_overrides(values)) + "\n")
    return {"yaml": str(path), "args": str(args), "apply": apply}


def read_overlay(path: str | Path) -> tuple[list[str], dict]:
    """An overlay yaml (as written above) as overrides, plus its `calibration` block (or {"path": ...})."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "overlay", "file not found", "give the overlay yaml written by `sim.validate fit=true`")
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise InputError(path, "overlay", "is not a mapping", "give the overlay yaml written by `sim.validate fit=true`")
    info = dict(data.pop("calibration", None) or {})
    info["path"] = str(path)
    return as_overrides(data), info
