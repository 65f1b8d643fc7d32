"""The one reader of YAML files outside Hydra's composition: configuration groups read by name (engine presets,
deployment presets, batching defaults, hardware and model specs), calibration inputs, and the files a run writes
(`.hydra/overrides.yaml`). A file that does not parse, or that holds something other than what the caller needs,
is refused as one `InputError` naming the file.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from inferplan.errors import InputError


def read_yaml(path: str | Path) -> Any:
    """The document in `path` (None for an empty file); a missing file or bad YAML is an `InputError`."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise InputError(str(path), "file", f"cannot be read ({type(err).__name__})", "give an existing file") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise InputError(str(path), "file", f"cannot parse ({type(err).__name__})", "fix the syntax") from None


def read_yaml_mapping(path: str | Path, fix: str = "write `key: value` lines") -> dict:
    """The mapping in `path` ({} for an empty file); anything else is refused with `fix`."""
    data = read_yaml(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(str(path), "file", f"is not a mapping (got a {type(data).__name__})", fix)
    return data


def read_yaml_list(path: str | Path, fix: str = "write a `- item` list") -> list:
    """The list in `path` ([] for an empty file); anything else is refused with `fix`."""
    data = read_yaml(path)
    if data is None:
        return []
    if not isinstance(data, list):
        raise InputError(str(path), "file", f"is not a list (got a {type(data).__name__})", fix)
    return data


def yaml_value(text: str, where: str, field: str) -> Any:
    """One value written in YAML syntax (a command-line option's `key=value`; None for an empty string)."""
    if not text.strip():
        return None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise InputError(where, field, f"cannot parse {text!r} ({type(err).__name__})", "fix the syntax") from None
