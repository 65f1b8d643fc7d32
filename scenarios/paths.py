"""Where a trace path written in a config points to.

- `data:traces/azure-llm-2023/x.csv.gz` → the data shipped inside the package (`scenarios/data/`): public traces,
  compressed, with their licences (`scenarios/data/README.md`). Every default scenario reads only these.
- `shared:traces/azure-llm-2023/x.csv` → a full external copy under the shared root: `$INFERPLAN_SHARED_ROOT` when
  that is set (CI points it at an empty folder to prove nothing depends on it), else `<repo>/../shared`;
- an absolute path → itself;
- a relative path → the current working directory if it exists there, else the repository root.

The repository root is the parent of the `scenarios` package. The shared root is read at each call, so a change of
the environment variable takes effect at once.
"""
from __future__ import annotations

from pathlib import Path

from inferplan.errors import InputError
from inferplan.paths import SHARED_ROOT_ENV, shared_root

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA_ROOT = Path(__file__).resolve().parent / "data"
DATA_PREFIX = "data:"
SHARED_PREFIX = "shared:"
__all__ = ["DATA_PREFIX", "DATA_ROOT", "REPO_ROOT", "SHARED_PREFIX", "SHARED_ROOT_ENV", "resolve_path", "shared_root"]


def resolve_path(path: str | Path, *, file: str = "traffic", field: str = "path") -> Path:
    """The existing file or folder `path` names; `InputError` listing the places tried when there is none."""
    text = str(path)
    if text.startswith(DATA_PREFIX):
        candidates = [DATA_ROOT / text[len(DATA_PREFIX):].lstrip("/")]
    elif text.startswith(SHARED_PREFIX):
        candidates = [shared_root() / text[len(SHARED_PREFIX):].lstrip("/")]
    elif Path(text).is_absolute():
        candidates = [Path(text)]
    else:
        candidates = [Path.cwd() / text, REPO_ROOT / text]
    for candidate in candidates:
        if candidate.exists():
            return candidate
    tried = ", ".join(str(c) for c in candidates)
    raise InputError(file, field, f"{text!r} does not exist (tried {tried})",
                     "give a path relative to the working directory or repo root, `data:<path under scenarios/data/>`"
                     f" (shipped traces), or `shared:<path under the shared root, ${SHARED_ROOT_ENV} or ../shared>`")
