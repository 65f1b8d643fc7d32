"""Imports point one way (docs/architecture.md): calibrate -> kernels; sim -> scenarios and calibrate's profile
schema, ops and efficiency forms (never kernels); inside sim, the engine (`sim.core`) never imports the programs
built on it; the dashboard reads `sim.results` and calls `sim.api` only; nothing imports the dashboard.

Read from the source with `ast`, so a violation anywhere in a module (a lazy import inside a function included)
fails here."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("kernels", "calibrate", "scenarios", "sim", "dashboard", "inferplan")


def _imports(path: Path) -> set[str]:
    """Every first-party module `path` imports: `import a.b` gives `a.b`; `from a import b` gives `a.b` (b may be
    a submodule or a name in `a`: the finer name is what the rules judge); relative imports are resolved."""
    tree = ast.parse(path.read_text(), str(path))
    package = path.relative_to(ROOT).with_suffix("").parts[:-1]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            out.update(f"{mod}.{a.name}" for a in node.names)
    return {m for m in out if m.split(".")[0] in PACKAGES}


def _modules(package: str) -> list[Path]:
    return sorted(p for p in (ROOT / package).rglob("*.py") if ".venv" not in p.parts)


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


# (package whose modules are checked, allowed first-party prefixes)
RULES = {
    "kernels": ("kernels", "inferplan"),
    "calibrate": ("calibrate", "kernels", "inferplan"),
    "scenarios": ("scenarios", "inferplan"),
    "sim.core": ("sim.core", "sim.compiled", "sim.config", "scenarios", "calibrate.ops", "calibrate.efficiency",
                 "calibrate.profile", "calibrate.aic", "inferplan"),
    "sim": ("sim", "scenarios", "calibrate.ops", "calibrate.efficiency", "calibrate.profile", "calibrate.aic",
            "calibrate.import_aic",
            "calibrate.vidur", "calibrate.reference_kernels", "inferplan"),
    "dashboard": ("dashboard", "sim.results", "sim.api", "inferplan"),
}


def _violations(package: str, allowed: tuple[str, ...]) -> list[str]:
    out = []
    for path in _modules(package.replace(".", "/")):
        for name in sorted(_imports(path)):
            if not any(_under(name, a) for a in allowed):
                out.append(f"{path.relative_to(ROOT)} imports {name}")
    return out


@pytest.mark.parametrize("package", sorted(RULES))
def test_imports_point_one_way(package):
    assert _violations(package, RULES[package]) == []


def test_nothing_imports_the_dashboard():
    found = [f"{p.relative_to(ROOT)} imports {n}" for pkg in PACKAGES if pkg != "dashboard"
             for p in _modules(pkg) for n in _imports(p) if _under(n, "dashboard")]
    assert found == []


def test_the_check_sees_a_violation(tmp_path, monkeypatch):
    """The rule is not vacuous: a lazy import of a program from inside the engine is found."""
    pkg = tmp_path / "sim" / "core"
    pkg.mkdir(parents=True)
    (pkg / "bad.py").write_text("def f():\n    from sim.plan import planner\n    from . import cluster\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    assert _violations("sim.core", RULES["sim.core"]) == ["sim/core/bad.py imports sim.plan.planner"]
