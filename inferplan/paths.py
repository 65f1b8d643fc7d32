"""Where the shared workbench folder is: `$INFERPLAN_SHARED_ROOT`, or `<repo>/../shared` when that is unset.

Full external copies (traces, reference tables, published benchmark tables) are read from there by `shared:`
paths and by the tests and tools that compare against them; nothing a default run needs lives there. CI points
the variable at an empty folder to prove it (`.ci/run`). Read at each call, so a change takes effect at once.
"""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_ROOT_ENV = "INFERPLAN_SHARED_ROOT"


def shared_root() -> Path:
    """The shared folder: `$INFERPLAN_SHARED_ROOT`, or `<repo>/../shared` when it is unset or empty."""
    value = os.environ.get(SHARED_ROOT_ENV, "")
    return Path(value).expanduser() if value else REPO_ROOT.parent / "shared"


def shown_path(path: str | Path) -> str:
    """A path as outputs show it: relative to the checkout when inside it (the same text on every machine, so a
    run's outputs do not depend on where the project was cloned), else as given."""
    p = Path(path)
    try:
        return p.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return str(path)
