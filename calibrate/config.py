"""`conf/calibrate.yaml` composed with the command line's overrides into `Settings`, every mistake one line.

Hydra's compose API (not `@hydra.main`) so that Hydra's own errors (unknown group option, unknown key, bad
syntax, missing hardware) become an `InputError` listing the valid choices instead of a multi-line report (the
one translation sim/compose.py also uses: inferplan/hydra_errors.py), and so
that nothing is written before the run starts. The config's `hydra.run.dir` is `out_dir`; with the compose API
no run directory is created: the run writes only into `out_dir`.
"""
from __future__ import annotations

from pathlib import Path

import yaml
from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from inferplan.config.yaml_files import read_yaml_mapping
from calibrate.settings import CONFIG, Settings
from inferplan.errors import InputError
from inferplan.hydra_errors import explain_hydra_error
from inferplan.interrupts import unmasked_interrupts
from inferplan.specs import CONF_DIR, available

GROUPS = ("hardware", "model")
USAGE = """usage: python -m calibrate hardware=<name> [model=<name>] [key=value ...]

Times every op <model> needs on this machine, fits a cost curve per op (held-out error reported) and writes
measurements.parquet, fit.json and <hardware>.parquet into out_dir (default calibration/<hardware>/).
  hardware: {hardware}
  model:    {model}
  keys:     {keys}
Example: python -m calibrate hardware=cpu_local model=llama3_8b budget_s=120 ops=[gemm,elementwise]
See conf/calibrate.yaml for each key and docs/calibration.md for the method."""


def usage() -> str:
    keys = [k for k in read_yaml_mapping(CONF_DIR / "calibrate.yaml") if k not in ("defaults", "hydra")]
    return USAGE.format(hardware=", ".join(available("hardware")), model=", ".join(available("model")),
                        keys=", ".join(keys))


def _valid_keys() -> list[str]:
    top = read_yaml_mapping(CONF_DIR / "calibrate.yaml")
    return [*GROUPS, *(k for k in top if k not in ("defaults", "hydra"))]


def compose_config(overrides: list[str]) -> DictConfig:
    """The composed configuration (with `hydra.runtime.choices`), or an `InputError`."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="calibrate"):
        try:
            with unmasked_interrupts():
                return compose(config_name="calibrate", overrides=list(overrides), return_hydra_config=True)
        except (HydraException, OmegaConfBaseException, ValueError) as err:  # (as sim/compose.py)
            raise explain_hydra_error(err, overrides, config=CONFIG, valid_keys=_valid_keys(),
                                      help_fix="see `python -m calibrate --help`") from None


def _spec_source(cfg: DictConfig, group: str, choice: str, overrides: list[str], out_dir: Path) -> str:
    """The conf entry's name, or, when the command line overrode some of its fields, a resolved copy written into
    out_dir (so the run uses, and records, exactly the figures given)."""
    if not any(o.lstrip("+~").startswith(f"{group}.") for o in overrides):
        return choice
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{group}.yaml"
    path.write_text(yaml.safe_dump(OmegaConf.to_container(cfg[group], resolve=True), sort_keys=False))
    return str(path)


def _seq(value: object, key: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    try:
        return tuple(str(v) for v in value)
    except TypeError:
        raise InputError(CONFIG, key, f"must be a list, got {value!r}", f"write {key}=[a,b]") from None


def _typed(value: object, key: str, kind: type) -> object:
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            raise ValueError
        return None if value is None else kind(value)
    except (TypeError, ValueError):
        raise InputError(CONFIG, key, f"must be {kind.__name__}, got {value!r}", f"give a {kind.__name__}") from None


def compose_settings(overrides: list[str]) -> Settings:
    cfg = compose_config(overrides)
    choices = cfg.hydra.runtime.choices
    out_dir = Path(str(cfg.out_dir))
    settings = Settings(
        hardware=_spec_source(cfg, "hardware", choices["hardware"], overrides, out_dir),
        model=_spec_source(cfg, "model", choices["model"], overrides, out_dir),
        out_dir=out_dir, ops=_seq(cfg.ops, "ops"), dtypes=_seq(cfg.dtypes, "dtypes"),
        tp=_typed(cfg.parallel.tp, "parallel.tp", int), ep=_typed(cfg.parallel.ep, "parallel.ep", int),
        grid=str(cfg.grid), budget_s=_typed(cfg.budget_s, "budget_s", float),
        install=_typed(cfg.install, "install", bool), peaks=str(cfg.peaks),
        holdout_every=_typed(cfg.holdout_every, "holdout_every", int),
        threads=_typed(cfg.threads, "threads", int), device=str(cfg.device), impls=str(cfg.impls),
        progress=_typed(cfg.progress, "progress", bool),
        allow_device_mismatch=_typed(cfg.allow_device_mismatch, "allow_device_mismatch", bool))
    settings.validate()
    return settings
