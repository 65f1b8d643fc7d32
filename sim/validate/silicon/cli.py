"""The `key=value` command lines of the silicon programs (`python -m sim.validate.silicon`, `... .targets`): each
bad argument one `InputError` naming the option and the fix."""
from __future__ import annotations

from inferplan.errors import InputError


def key_values(argv: list[str], options: tuple[str, ...]) -> dict[str, str]:
    """`argv` as {key: value}; an argument without `=` or with a key not in `options` is refused."""
    args = {}
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep or key not in options:
            raise InputError("command line", arg, "unknown argument", f"give key=value with keys {', '.join(options)}")
        args[key] = value
    return args


def positive(args: dict, key: str, default: int | None) -> int | None:
    """A whole number >= 1 (`default` when the key is absent)."""
    if key not in args:
        return default
    try:
        value = int(args[key])
    except ValueError:
        value = 0
    if value < 1:
        raise InputError("command line", key, f"must be a whole number >= 1, got {args[key]!r}", f"give e.g. {key}=2")
    return value


def flag(args: dict, key: str) -> bool:
    """`true` or `false` (false when the key is absent)."""
    value = args.get(key, "false").lower()
    if value not in ("true", "false"):
        raise InputError("command line", key, f"must be true or false, got {args[key]!r}", f"give {key}=true")
    return value == "true"
