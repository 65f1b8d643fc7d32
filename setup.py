"""Build: the simulator core (sim/core/) compiled with mypyc, beside their sources (everything else is declared in
pyproject.toml). The same Python source runs about 2.5x faster compiled (bench/sim_speed.py); the source
SHA-256s go to sim/_compiled.json so that `import sim` runs the sources instead when one was edited since
(sim/compiled.py). INFERPLAN_PURE_PYTHON=1 at install builds nothing (and removes an earlier build's modules); so
does a machine without a C compiler (the extensions are optional)."""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).resolve().parent
# The simulator core (sim/core/, docs/architecture.md) is what a run executes event by event: every module there
# is compiled, so the list follows the tree (a new router, batching policy or autoscaler is compiled by living
# there). Package __init__ files (registries) stay interpreted.
COMPILED = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "sim" / "core").rglob("*.py")
                  if p.name != "__init__.py")
# sim/compiled.py (standard library only) owns the manifest; loaded as a file, since importing the package
# would run its import-time guard.
_spec = importlib.util.spec_from_file_location("_inferplan_compiled", ROOT / "sim" / "compiled.py")
compiled = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compiled)
# The commands that build (pip's metadata steps run `egg_info` first: they neither compile nor remove anything).
BUILDS = {"build", "build_ext", "bdist_wheel", "editable_wheel", "develop", "install"}


def _remove_old_build() -> None:
    compiled.MANIFEST.unlink(missing_ok=True)
    for path in [*ROOT.glob("sim/**/*.so"), *ROOT.glob("*__mypyc*.so")]:
        path.unlink()


def _ext_modules() -> list:
    if not BUILDS.intersection(sys.argv[1:]):
        return []
    _remove_old_build()
    if compiled.pure_requested():
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:  # (a build without isolation, in an environment without mypy)
        return []
    os.chdir(ROOT)  # mypyc resolves module names from paths relative to the project
    # The manifest records the sources before they are read: one edited during the build then counts as stale.
    compiled.write_manifest(COMPILED, ROOT)
    os.environ.pop("MYPYPATH", None)  # (sim/compiled.py MYPY_ARGS: what the build reads, and why)
    exts = mypycify([*compiled.MYPY_ARGS, *COMPILED], opt_level="3", group_name="inferplan_sim")
    for ext in exts:
        ext.optional = True  # no compiler: the package installs interpreted
    return exts


setup(ext_modules=_ext_modules())
