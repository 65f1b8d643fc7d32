"""Hydra's composition errors (multi-line reports) as one-line `InputError`s, for every program that composes a
config with Hydra's compose API (sim/compose.py, calibrate/config.py): one path, one format.

An unknown group option names the group's valid choices; a group that must be chosen says so; an unknown key is
`inferplan.errors.unknown_key` when the caller knows the valid keys (else it says how to add one with `+`);
anything else is Hydra's first line, naming the overrides and where to look.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from inferplan.errors import InputError, unknown_key
from inferplan.specs import available


def explain_hydra_error(err: Exception, overrides: Sequence[str], *, config: str = "command line",
                        valid_keys: Sequence[str] | None = None, groups: Sequence[str] = (),
                        help_fix: str = "see `python -m sim --help`") -> InputError:
    """The `InputError` for a Hydra/OmegaConf composition error of `overrides`; `config` names the config file
    for errors about keys (default: the command line), `groups` the config groups a `+key=` fix may list."""
    text = str(err)
    m = re.search(r"Could not find '([\w/]+)/([^']+)'", text)
    if m:
        group, name = m.group(1).strip("/"), m.group(2)
        if group == "hydra/launcher":
            return InputError("hydra/launcher", group, f"unknown launcher {name!r}",
                              "use workers (the default), joblib, or ray (pip install -e '.[ray]')")
        return InputError(f"conf/{group}", group, f"unknown {group} {name!r}", f"use one of: {', '.join(available(group))}")
    m = re.search(r"You must specify '([\w/]+)'", text)
    if m:
        group = m.group(1)
        return InputError(config, group, "not given", f"add {group}=<name>, one of: {', '.join(available(group))}")
    m = re.search(r"Could not override '([^']+)'", text) or re.search(r"Key '([^']+)' is not in struct", text)
    if m:
        if valid_keys is not None:
            return unknown_key(config, m.group(1), valid_keys)
        return InputError(config, m.group(1), "not in the composed config",
                          f"check the spelling, or prefix with + to add a key the scenario does not set "
                          f"(+{m.group(1)}=...); groups: {', '.join(f'{g}=' for g in groups)}")
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(err).__name__)
    return InputError(config, " ".join(overrides) or "(none)", first, help_fix)
