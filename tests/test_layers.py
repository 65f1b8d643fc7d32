"""Imports point one way (docs/architecture.md): calibrate -> kernels; sim -> scenarios and calibrate's profile
schema, ops and efficiency forms (never kernels); inside sim, the engine (`sim.core`) never imports the programs
built on it, the configuration loader (sim/config.py, sim/resolve.py) included: it reads the records of
`inferplan.config`; the dashboard reads `sim.results` and calls `sim.api` only; nothing imports the dashboard;
and the first-party module graph has no cycle.

Read from the source with `ast`, so a violation anywhere in a module (a lazy import inside a function included)
fails here."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("kernels", "calibrate", "scenarios", "sim", "dashboard", "inferplan")


def _imports(path: Path, root: Path | None = None) -> set[str]:
    """Every first-party module `path` imports: `import a.b` gives `a.b`; `from a import b` gives `a.b` (b may be
    a submodule or a name in `a`: the finer name is what the rules judge); relative imports are resolved."""
    tree = ast.parse(path.read_text(), str(path))
    package = path.relative_to(root or ROOT).with_suffix("").parts[:-1]
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
    "sim.core": ("sim.core", "sim.compiled", "scenarios", "calibrate.ops", "calibrate.efficiency",
                 "calibrate.profile", "calibrate.aic", "inferplan"),
    # The configuration's records: below the engine, the programs and calibration, importing none of them.
    "inferplan": ("inferplan",),
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


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph(root: Path) -> dict[str, set[str]]:
    """First-party module -> the first-party modules it imports (module-level and lazy imports alike; `from a
    import b` is an edge to `a.b` when that is a module, else to `a`). Rule: a package's `__init__` importing its
    own submodules (a registry or re-export) is not an edge, since Python runs the package first whichever
    submodule is imported; every other import is."""
    paths = {_module_name(p, root): p for pkg in PACKAGES if (root / pkg).is_dir()
             for p in sorted((root / pkg).rglob("*.py")) if ".venv" not in p.parts}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        edges = set()
        for target in _imports(path, root):
            while target not in paths and "." in target:
                target = target.rpartition(".")[0]
            own_submodule = path.name == "__init__.py" and target.startswith(name + ".")
            if target in paths and target != name and not own_submodule:
                edges.add(target)
        graph[name] = edges
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of `graph` as [a, b, ..., a], or [] when there is none (depth-first search)."""
    state: dict[str, int] = {}   # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        path.pop()
        return []

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return []


def test_the_module_graph_has_no_cycle():
    assert _cycle(_graph(ROOT)) == []


def test_the_cycle_check_sees_a_cycle(tmp_path):
    """The check is not vacuous: a lazy import that closes a loop through three modules is found; a package's
    registry importing its own submodules is not a cycle."""
    pkg = tmp_path / "sim"
    (pkg / "core" / "router").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "config.py").write_text("from sim.resolve import resolve_pools\n")
    (pkg / "resolve.py").write_text("from sim.core.factory import build\n")
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "core" / "factory.py").write_text("def build():\n    from sim.config import CostConfig\n")
    (pkg / "core" / "router" / "__init__.py").write_text("from sim.core.router.rr import RR\n")
    (pkg / "core" / "router" / "rr.py").write_text("from sim.core.router import base\n")
    assert _cycle(_graph(tmp_path)) == ["sim.config", "sim.resolve", "sim.core.factory", "sim.config"]
    (pkg / "core" / "factory.py").write_text("def build():\n    from sim.core.router.rr import RR\n")
    assert _cycle(_graph(tmp_path)) == []


# The programs built on the engine read its results, not its objects: from `sim.core` they import only these
# public entries (names at the finest level `_imports` reports: a module, or one name in a module).
PROGRAMS = ("sim.results", "sim.review", "sim.plan", "sim.validate", "sim.sweep")
CORE_PUBLIC = (
    "sim.core.outcome",              # the typed outcome of a run (RunOutcome, PoolOutcome, ...)
    "sim.core.pricing",              # step prices of a pool without a simulation, single ops' analytical prices
    "sim.core.policies",             # a policy's settings as the engine builds it (deployment objects)
    "sim.core.metrics.percentiles",  # the one percentile rule the summary, the review and the engine share
)
def _program_violations() -> list[str]:
    out = []
    for package in PROGRAMS:
        for path in _modules(package.replace(".", "/")):
            rel = path.relative_to(ROOT).as_posix()
            allowed = CORE_PUBLIC
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
