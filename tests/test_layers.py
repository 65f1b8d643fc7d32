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


# The programs built on the engine read its results, not its objects: from `sim.core` they import only these
# public entries (names at the finest level `_imports` reports: a module, or one name in a module).
PROGRAMS = ("sim.results", "sim.review", "sim.plan", "sim.validate", "sim.sweep")
CORE_PUBLIC = (
    "sim.core.outcome",              # the typed outcome of a run (RunOutcome, PoolOutcome, ...)
    "sim.core.pricing",              # step prices of a pool without a simulation (the day plan's capacity)
    "sim.core.metrics.percentiles",  # the one percentile rule the summary, the review and the engine share
)
# Modules allowed past the rule, each with its reason.
CORE_INTERNALS_ALLOWED = {
    # The cost-model comparison prices single ops, below the step the public entry prices: it is a test of the
    # analytical op forms themselves (sim/core/cost/pricer.py, comm.py, experts.py).
    "sim/validate/op_analytical.py": ("sim.core.cost",),
    # Kubernetes autoscaling reads an autoscaler's parameters back as the simulation builds them (a translation of
    # the policy's settings, not a result; its owner moves it to a public entry).
    "sim/plan/deploy/autoscaling.py": ("sim.core.fleet.autoscaler",),
}


def _program_violations() -> list[str]:
    out = []
    for package in PROGRAMS:
        for path in _modules(package.replace(".", "/")):
            rel = path.relative_to(ROOT).as_posix()
            allowed = CORE_PUBLIC + CORE_INTERNALS_ALLOWED.get(rel, ())
            for name in sorted(_imports(path)):
                if _under(name, "sim.core") and not any(_under(name, a) for a in allowed):
                    out.append(f"{rel} imports {name}")
    return out


def test_programs_import_only_the_engines_public_entries():
    assert _program_violations() == []


def test_the_program_rule_sees_a_violation(tmp_path, monkeypatch):
    """Not vacuous: a program reaching into the cluster is found, the outcome types are not."""
    pkg = tmp_path / "sim" / "review"
    pkg.mkdir(parents=True)
    (pkg / "bad.py").write_text("from sim.core.outcome import RunOutcome\nfrom sim.core.cluster import Cluster\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    assert _program_violations() == ["sim/review/bad.py imports sim.core.cluster.Cluster"]
