"""Which simulator modules run compiled, and the guard that keeps a stale build from running.

`pip install` compiles the simulator's hot modules with mypyc (setup.py; the same Python source, about 2.5x
faster) and records each source's SHA-256 in `_compiled.json` beside this file. An editable install puts the
compiled modules beside their sources, where Python imports them first: a source edited since would silently
not run. So at `import sim`, when any recorded source has changed (or INFERPLAN_PURE_PYTHON=1 is set), every
compiled module is imported from its source instead (all of them: compiled modules call each other directly,
so mixing old and new code is not an option), with a warning saying how to rebuild. Compiled and interpreted
runs give the same output bytes (tests/sim/test_compiled.py).
"""
from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from pathlib import Path

MANIFEST = Path(__file__).with_name("_compiled.json")
PURE_ENV = "INFERPLAN_PURE_PYTHON"


# What mypy may read decides the machine code mypyc writes: a third-party type it can read is compiled as that type,
# one it cannot is `Any`, checked where it meets a typed value. Left to itself mypy reads the site-packages of the
# interpreter that runs the build, so one commit compiled differently before and after numpy was installed there.
# The build reads this tree, mypy's bundled standard-library types and `typings/` (the array types the cost
# composition mixes with floats) and nothing installed: every machine compiles the same code. No cache from an
# earlier build is read, nor any user's mypy configuration. The settings are pyproject.toml's [tool.mypy];
# tests/sim/test_compiled_types.py type-checks the compiled modules with exactly these arguments.
MYPY_ARGS = ("--config-file=pyproject.toml",)  # relative to the repository root (the build's working directory)


class StaleBuildWarning(UserWarning):
    """Compiled modules are older than their sources: the sources run, uncompiled."""


def source_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pure_requested() -> bool:
    """INFERPLAN_PURE_PYTHON set (to anything but 0): run, and build, nothing compiled."""
    return os.environ.get(PURE_ENV, "") not in ("", "0")


def write_manifest(paths: list[str], root: Path, path: Path = MANIFEST) -> None:
    """Record the SHA-256 of each source about to be compiled (`paths` relative to `root`, e.g.
    sim/core/instance/kv_cache.py), under its module name. Called by setup.py."""
    sources = {p[:-3].replace("/", "."): source_sha256(root / p) for p in paths}
    path.write_text(json.dumps({"compiler": "mypyc", "sources": sources}, indent=1) + "\n")


def read_manifest(path: Path = MANIFEST) -> dict[str, str]:
    """{module name: SHA-256 of the source it was compiled from}; empty when nothing was compiled."""
    try:
        return dict(json.loads(path.read_text())["sources"])
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def module_source(name: str, root: Path) -> Path:
    """The source file of module `name` (e.g. sim.core.instance.kv_cache) under the directory holding `sim`."""
    return root.joinpath(*name.split(".")).with_suffix(".py")


def has_extension(name: str, root: Path) -> bool:
    """Whether a compiled extension of module `name` sits beside its source (a build without a C compiler has
    none)."""
    source = module_source(name, root)
    return any(source.with_suffix(suffix).is_file() for suffix in importlib.machinery.EXTENSION_SUFFIXES)


def stale_modules(sources: dict[str, str], root: Path) -> list[str]:
    """Recorded modules whose source changed (or disappeared) since it was compiled."""
    stale = []
    for name, digest in sources.items():
        path = module_source(name, root)
        if not path.is_file() or source_sha256(path) != digest:
            stale.append(name)
    return stale


class SourceFirst(importlib.abc.MetaPathFinder):
    """Import the named modules from their .py sources even where a compiled extension sits beside them."""

    def __init__(self, names) -> None:
        self.names = frozenset(names)

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.names:
            return None
        for entry in path or sys.path:
            source = Path(entry, fullname.rpartition(".")[2] + ".py")
            if source.is_file():
                return importlib.util.spec_from_file_location(fullname, source)
        return None


def install_guard(manifest: Path = MANIFEST) -> str:
    """Decide how the compiled modules load (called by `sim/__init__.py` before any of them is imported) and say
    which: 'compiled', 'interpreted (<why>)' or 'interpreted (not compiled)'."""
    sources = read_manifest(manifest)
    root = manifest.parent.parent
    if not sources or not all(has_extension(name, root) for name in sources):
        return "interpreted (not compiled)"
    if pure_requested():
        sys.meta_path.insert(0, SourceFirst(sources))
        return f"interpreted ({PURE_ENV} is set)"
    stale = stale_modules(sources, root)
    if stale:
        sys.meta_path.insert(0, SourceFirst(sources))
        # (explicit location, line 0: one line, naming the manifest, with no source line under it)
        warnings.warn_explicit(f"{module_source(stale[0], Path()).as_posix()} changed since it was compiled "
                               f"({len(stale)} module(s)); running the simulator interpreted (slower) until "
                               "`pip install -e .` recompiles", StaleBuildWarning, str(manifest), 0)
        return f"interpreted ({len(stale)} compiled module(s) older than their source)"
    return "compiled"

