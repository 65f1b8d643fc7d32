"""Which measured grid prices a pool: the shipped AIConfigurator profiles by GPU and engine, and the choice rule.

Layout: `calibrate/profiles/aic/<hardware>/<framework>.parquet` (one per engine that measured the GPU, made by
`python -m calibrate.import_aic`), and any profile a user imports beside them (`--engine vllm@0.14.0` writes
`<framework>@<version>.parquet`). Each file's metadata names its engine (`engine.framework`), the versions that
measured its ops, and the engine with the most measured rows on that GPU (`engine.default`).

The rule (`choose`): a pool running an engine preset of a framework the GPU was measured in gets that framework's
grid whose version is nearest the preset's (release numbers compared major, then minor, then patch; a tie goes
to the newer); a pool naming no engine preset (the generic engine: the batching policy decides), or an engine the
GPU was not measured in, gets the grid of the engine with the most measured rows on that GPU, and the reason says
so. Reading a catalogue opens only the files' footers.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
from packaging.version import InvalidVersion, Version

from calibrate.aic.names import ENGINE_NAMES, ENGINES
from calibrate.profile import METADATA_KEY


@dataclass(frozen=True)
class Grid:
    """One shipped (or imported) grid profile: its file, the engine and version that measured its ops, and
    the GPU's engine with the most measured rows (`default`)."""

    path: Path
    framework: str
    version: str
    default: str


@dataclass(frozen=True)
class Choice:
    """The grid a pool is priced from, and why (a sentence for the run's provenance)."""

    grid: Grid
    reason: str


def _release(version: str) -> tuple[int, int, int]:
    """(major, minor, patch) of a version string (`0.5.6.post2` -> (0, 5, 6); `1.x` -> (1, 0, 0))."""
    m = re.search(r"\d+(?:\.\d+)*", version or "")
    if m is None:
        return (0, 0, 0)
    try:
        parts = Version(m.group(0)).release
    except InvalidVersion:
        return (0, 0, 0)
    padded = (*parts, 0, 0, 0)
    return (padded[0], padded[1], padded[2])


def _version_sort(version: str):
    try:
        return (1, Version(version))
    except InvalidVersion:
        return (0, Version("0"))


def read_grid(path: Path) -> Grid | None:
    """The catalogue entry of one grid profile file (None: not a grid profile)."""
    try:
        meta = json.loads((pq.read_schema(path).metadata or {}).get(METADATA_KEY, b"{}"))
    except Exception:  # an unreadable file is not offered; loading it by path reports the problem
        return None
    if meta.get("kind") != "measured_grid":
        return None
    engine = meta.get("engine") or {}
    framework = str(engine.get("framework") or "")
    fams = meta.get("provenance") or {}
    versions = sorted({str(f["version"]) for f in fams.values()
                       if isinstance(f, dict) and f.get("framework") == framework and f.get("version")},
                      key=_version_sort)
    counts = engine.get("row_counts") or {}
    default = str(engine.get("default") or (max(counts, key=lambda e: counts[e]) if counts else framework))
    return Grid(path, framework, versions[-1] if versions else "", default)


def catalogue(root: Path, hardware: str) -> list[Grid]:
    """Every grid profile for `hardware` under `root` (`<root>/<hardware>/*.parquet`, and the older one-file layout
    `<root>/<hardware>.parquet`), sorted by file name."""
    paths = sorted((root / hardware).glob("*.parquet")) if (root / hardware).is_dir() else []
    if (root / f"{hardware}.parquet").is_file():
        paths.append(root / f"{hardware}.parquet")
    return [g for g in (read_grid(p) for p in paths) if g is not None]


def engine_of(preset_name: str) -> str | None:
    """The framework an engine preset runs (`vllm_v1_serve` -> vllm), None for the generic engine or a preset
    named after no framework the database measures."""
    head = (preset_name or "").split("_", 1)[0]
    return head if head in ENGINES else None


def choose(grids: list[Grid], preset_name: str, preset_version: str) -> Choice | None:
    """The grid for a pool running engine preset `preset_name` at `preset_version` (module doc); None when no
    grid is shipped for the GPU."""
    if not grids:
        return None
    framework = engine_of(preset_name)
    same = [g for g in grids if g.framework == framework]
    if same:
        want = _release(preset_version)

        def distance(g: Grid) -> tuple:
            have = _release(g.version)
            gap = tuple(abs(a - b) for a, b in zip(have, want))
            return (gap, tuple(-x for x in have))

        best = min(same, key=distance)
        name = ENGINE_NAMES.get(best.framework, best.framework)
        others = sorted({g.version for g in same} - {best.version}, key=_version_sort)
        reason = (f"the pool runs {preset_name} ({preset_version or 'no version stated'}): measured in {name} "
                  f"{best.version}, the nearest measured version"
                  + (f" (also shipped: {', '.join(others)})" if others else ""))
        return Choice(best, reason)
    default = grids[0].default
    pick = [g for g in grids if g.framework == default] or grids
    best = max(pick, key=lambda g: _version_sort(g.version))
    name = ENGINE_NAMES.get(best.framework, best.framework)
    why = ("the pool names no engine preset" if not preset_name or preset_name == "generic"
           else f"no grid of the pool's engine ({preset_name}) for this GPU")
    return Choice(best, f"{why}: measured in {name} {best.version}, the engine with the most measured rows on "
                        "this GPU")
