"""Bad input is reported as one line that names the file, the field and the fix.

Every loader (configs, traces, profiles, result folders) raises `InputError`; the entry points catch it, print
its one-line message to stderr and exit with status 2, keeping whatever was already written.
"""
from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator


class InputError(Exception):
    """A user-supplied input is wrong: `file` (or config group), `field` (column, key or row) and the `fix`."""

    def __init__(self, file: str, field: str, problem: str, fix: str) -> None:
        self.file, self.field, self.problem, self.fix = str(file), str(field), problem, fix
        super().__init__(f"{self.file}: {self.field}: {problem} (fix: {fix})")


def unknown_key(file: str, field: str, valid) -> InputError:
    """The one form every validator refuses a key it does not know in: `<file>: <field>: unknown key (fix: valid
    keys: a, b, c)`."""
    return InputError(file, field, "unknown key", f"valid keys: {', '.join(map(str, valid))}")


@contextlib.contextmanager
def exit_on_input_error(exit_code: int = 2) -> Iterator[None]:
    """Turn an `InputError` into a one-line message on stderr and a non-zero exit, without a traceback."""
    try:
        yield
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(exit_code) from None
