"""The compiled core type-checks as the build compiles it (sim/compiled.py MYPY_ARGS, pyproject.toml [tool.mypy]).

mypyc turns each inferred type into machine code: a value that is a numpy array at run time but that mypy infers as
a float (`x = 0.0` then `x = x + per_context_array`) compiles to an unboxing that fails where the interpreted
source runs. With the array types of `typings/` such a line is a type error, so this check fails before any
build does."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sim import compiled

ROOT = Path(__file__).resolve().parents[2]
COMPILED = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "sim" / "core").rglob("*.py")
                  if p.name != "__init__.py")

mypy_api = pytest.importorskip("mypy.api", reason="mypy (the build's type checker) is a test dependency")


def _mypy(*paths: str) -> tuple[str, int]:
    env = {k: v for k, v in os.environ.items() if k != "MYPYPATH"}
    proc = subprocess.run([sys.executable, "-m", "mypy", *compiled.MYPY_ARGS, *paths], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    return proc.stdout + proc.stderr, proc.returncode


def test_compiled_modules_type_check_with_the_build_settings():
    out, code = _mypy(*COMPILED)
    assert code == 0, out


def test_a_float_that_becomes_an_array_is_a_type_error(tmp_path):
    # The pattern that crashed the compiled decode pricing: a float accumulator fed per-context arrays.
    probe = tmp_path / "probe.py"
    probe.write_text("import numpy as np\n\n\ndef f(a: np.ndarray) -> None:\n    x = 0.0\n    x = x + 2 * a\n")
    out, code = _mypy(str(probe))
    assert code == 1 and "Incompatible types in assignment" in out, out
