"""Where a trace path written in a config points to.

- `shared:traces/azure-llm-2023/x.csv` → the `shared/` folder next to the repository (`<repo>/../shared`);
- an absolute path → itself;
- a relative path → the current working directory if it exists there, else the repository root.

The repository root is the parent of the `scenarios` package.
"""
from __future__ import annotations

from pathlib import Path

from inferplan.errors import InputError

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_ROOT = REPO_ROOT.parent / "shared"
SHARED_PREFIX = "shared:"


def resolve_path(path: str | Path, *, file: str = "traffic", field: str = "path") -> Path:
    """The existing file or folder `path` names; `InputError` listing the places tried when there is none."""
    text = str(path)
    if text.startswith(SHARED_PREFIX):
        candidates = [SHARED_ROOT / text[len(SHARED_PREFIX):].lstrip("/")]
    elif Path(text).is_absolute():
        candidates = [Path(text)]
    else:
        candidates = [Path.cwd() / text, REPO_ROOT / text]
    for candidate in candidates:
        if candidate.exists():
            return candidate
    tried = ", ".join(str(c) for c in candidates)
    raise InputError(file, field, f"{text!r} does not exist (tried {tried})",
                     "give a path relative to the working directory or repo root, or `shared:<path under shared/>`")
