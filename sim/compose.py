"""Compose the Hydra config outside `hydra.main` (tests, the dashboard's what-if, pre-validation of the CLI),
turning Hydra's multi-line errors into one-line `InputError`s that list the valid choices."""
from __future__ import annotations

import re

from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from inferplan.errors import InputError
from inferplan.interrupts import unmasked_interrupts
from inferplan.specs import CONF_DIR, available

GROUPS = ("scenario", "batching", "router", "autoscaler", "cost")


def explain_hydra_error(err: Exception, overrides: list[str]) -> InputError:
    """Map a Hydra/OmegaConf composition error to the override at fault and its valid choices."""
    text = str(err)
    m = re.search(r"Could not find '([\w/]+)/([^']+)'", text) or re.search(r"In '[^']*': Could not find '([\w/]+)/([^']+)'", text)
    if m:
        group, name = m.group(1).strip("/"), m.group(2)
        if group == "hydra/launcher":
            return InputError("hydra/launcher", group, f"unknown launcher {name!r}",
                              "use joblib (the default) or ray (pip install -e '.[ray]')")
        return InputError(f"conf/{group}", group, f"unknown {group} {name!r}", f"use one of: {', '.join(available(group))}")
    m = re.search(r"Could not override '([^']+)'", text) or re.search(r"Key '([^']+)' is not in struct", text)
    if m:
        return InputError("command line", m.group(1), "not in the composed config",
                          f"check the spelling, or prefix with + to add a key the scenario does not set "
                          f"(+{m.group(1)}=...); groups: {', '.join(f'{g}=' for g in GROUPS)}")
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(err).__name__)
    return InputError("command line", " ".join(overrides) or "(none)", first, "see `python -m sim --help`")


def compose_config(overrides: list[str] | None = None, config_name: str = "config") -> DictConfig:
    """The composed config for `overrides` (Hydra syntax), with Hydra's runtime fields left unresolved."""
    overrides = list(overrides or [])
    try:
        with unmasked_interrupts(), initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            cfg = compose(config_name=config_name, overrides=overrides)
    except (HydraException, OmegaConfBaseException, ValueError) as err:
        raise explain_hydra_error(err, overrides) from None
    OmegaConf.set_struct(cfg, False)
    cfg.pop("hydra", None)
    return cfg
