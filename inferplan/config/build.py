"""`build`: a record from a mapping of the yaml, every key checked against the record's fields and each scalar
coerced to its field's type (read from the class with `typing.get_type_hints`: the records are not compiled, so
their annotations are the types as written).
"""
from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any

from inferplan.errors import InputError, unknown_key

_SCALARS = (bool, int, float, str)


@functools.cache
def _scalar_types(cls) -> dict[str, type | None]:
    """Each field's scalar type (`int | None` -> int), or None for a field that is not a single scalar type."""
    hints = typing.get_type_hints(cls)
    out: dict[str, type | None] = {}
    for f in dataclasses.fields(cls):
        typ = hints.get(f.name)
        if isinstance(typ, types.UnionType) or typing.get_origin(typ) is typing.Union:
            args = [a for a in typing.get_args(typ) if a is not type(None)]
            typ = args[0] if len(args) == 1 else None
        out[f.name] = typ if typ in _SCALARS else None
    return out


def _coerce(value: Any, typ: type) -> Any:
    if typ is float:
        return float(value)
    if typ is int:
        if isinstance(value, float) and not value.is_integer():
            raise ValueError
        return int(value)
    if typ is bool:
        if not isinstance(value, bool):
            raise ValueError
        return value
    return str(value)


def build(cls, data: dict | None, where: str, *, extra_keys: tuple[str, ...] = (), hidden: tuple[str, ...] = ()):
    """Instantiate dataclass `cls` from a mapping, rejecting unknown keys and coercing scalar fields. `extra_keys`
    are keys the caller parsed off the mapping itself (listed among the valid keys of the message); `hidden` are
    fields the loader sets, never the yaml."""
    data = dict(data or {})
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in hidden}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise unknown_key(where, unknown[0], [*fields, *extra_keys])
    scalars = _scalar_types(cls)
    kwargs = {}
    for name, f in fields.items():
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise InputError(where, name, "missing", f"add `{name}:`")
            continue
        value, typ = data[name], scalars[name]
        if typ is not None and value is not None:
            try:
                value = _coerce(value, typ)
            except (TypeError, ValueError):
                raise InputError(where, name, f"has the wrong type: {value!r}", f"give a {typ.__name__}") from None
        kwargs[name] = value
    return cls(**kwargs)
