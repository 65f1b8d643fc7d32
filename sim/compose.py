"""Compose the Hydra config outside `hydra.main` (tests, the dashboard's what-if, pre-validation of the CLI),
turning Hydra's multi-line errors into one-line `InputError`s that list the valid choices."""
from __future__ import annotations

from collections.abc import Callable

from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from inferplan.errors import InputError
from inferplan.hydra_errors import explain_hydra_error as hydra_error
from inferplan.interrupts import unmasked_interrupts
from inferplan.specs import CONF_DIR

GROUPS = ("scenario", "batching", "router", "autoscaler", "cost")


def explain_hydra_error(err: Exception, overrides: list[str]) -> InputError:
    """Map a Hydra/OmegaConf composition error to the override at fault and its valid choices."""
    return hydra_error(err, overrides, groups=GROUPS)


def compose_config(overrides: list[str] | None = None, config_name: str = "config") -> DictConfig:
    """The composed config for `overrides` (Hydra syntax), with Hydra's runtime fields left unresolved."""
    with unmasked_interrupts(), initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        return compose_initialized(overrides, config_name)


def compose_initialized(overrides: list[str] | None = None, config_name: str = "config") -> DictConfig:
    """`compose_config` inside an `initialize_config_dir` the caller holds (the CLI's single run composes with the
    same Hydra instance it then runs, so the config files are read and parsed once)."""
    overrides = list(overrides or [])
    cfg = _translated(overrides, lambda: compose(config_name=config_name, overrides=overrides))
    OmegaConf.set_struct(cfg, False)
    cfg.pop("hydra", None)
    return cfg


def compose_run(hydra, overrides: list[str], config_name: str = "config") -> DictConfig:
    """The CLI's plain run composed once, as `Hydra.run` composes it (from the shell, logging configured), with
    its `hydra` node: the caller validates `task_config` of it, then runs the job on it (`sim/__main__.py`)."""
    return _translated(overrides, lambda: hydra.compose_config(config_name=config_name, overrides=overrides,
                                                                 run_mode=RunMode.RUN, with_log_configuration=True))


def _translated(overrides: list[str], compose_fn: Callable[[], DictConfig]) -> DictConfig:
    """`compose_fn()` with Ctrl-C live, Hydra's and OmegaConf's errors as one-line `InputError`s."""
    try:
        with unmasked_interrupts():
            return compose_fn()
    except (HydraException, OmegaConfBaseException, ValueError) as err:
        raise explain_hydra_error(err, overrides) from None


def task_config(cfg: DictConfig) -> DictConfig:
    """A copy of a composed config without its `hydra` node (what the task sees), open to additions."""
    task = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
    OmegaConf.set_struct(task, False)
    return task
