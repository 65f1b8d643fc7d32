"""Finished runs stored by a hash of their resolved configuration, so a repeated or extended plan only simulates
configurations it has not seen.

Key = sha256 of (the resolved config as canonical JSON, without `metrics.progress` and `check`) + the **code
fingerprint**: the contents of the simulator's sources and data (`sim/` but the planner and sweeps, `scenarios/`,
`calibrate/`, `inferplan/`, `conf/`, calibrated profiles) and of the files the config names under `path:` or
`profile:` (traces, length samples, profiles; a folder by its files' names, sizes and times). Editing any of them
starts a fresh key, so a cached result is always what the current code would compute (runs are deterministic,
docs/architecture.md INV-5). Installed packages (numpy, simpy) are not part of it: after upgrading them, plan with
`cache=false` or delete the cache folder.

Layout: `<cache_dir>/<hash[:2]>/<hash>/` is a complete run folder (docs/results.md) with `DONE` written last; runs
are written to a temporary sibling and renamed into place, so concurrent plans never see half a run.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from functools import lru_cache
from pathlib import Path

from inferplan.errors import InputError
from inferplan.specs import CONF_DIR
from sim.results.read import try_summary

REPO_DIR = CONF_DIR.parent
_SOURCE_GLOBS = ("sim/**/*.py", "scenarios/**/*", "calibrate/**/*", "inferplan/**/*.py", "conf/**/*.yaml")
_NOT_SIMULATOR = ("sim/plan/", "sim/sweep/")


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """sha256 over the simulator's source and data files (path and content), in path order."""
    digest = hashlib.sha256()
    files = sorted({p for g in _SOURCE_GLOBS for p in REPO_DIR.glob(g) if p.is_file()})
    for path in files:
        rel = path.relative_to(REPO_DIR).as_posix()
        if rel.startswith(_NOT_SIMULATOR) or "__pycache__" in rel:
            continue
        digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _named_files(node) -> list[Path]:
    """Files and folders the config names under a `path` or `profile` key (traces, length samples, profiles)."""
    from scenarios.paths import resolve_path

    if isinstance(node, list):
        return [p for v in node for p in _named_files(v)]
    if not isinstance(node, dict):
        return []
    found = []
    for key, value in node.items():
        if key in ("path", "profile") and isinstance(value, str) and value != "auto":
            try:
                found.append(resolve_path(value))
            except (InputError, OSError):
                pass   # the simulation reports it
        else:
            found += _named_files(value)
    return found


def _digest_named(digest, path: Path) -> None:
    """A file by content; a folder by its files' names, sizes and modification times."""
    if path.is_file():
        digest.update(path.read_bytes())
        return
    for f in sorted(q for q in path.rglob("*") if q.is_file()):
        st = f.stat()
        digest.update(f"{f.relative_to(path).as_posix()}:{st.st_size}:{st.st_mtime_ns}".encode())


def config_hash(resolved: dict) -> str:
    """The cache key of a resolved config (a plain dict, `OmegaConf.to_container(cfg, resolve=True)`)."""
    cfg = json.loads(json.dumps(resolved, default=str))
    cfg.get("metrics", {}).pop("progress", None)
    cfg.pop("check", None)  # (the CLI's gate: it changes the exit status, not the run)
    digest = hashlib.sha256(code_fingerprint().encode())
    digest.update(json.dumps(cfg, sort_keys=True, separators=(",", ":")).encode())
    for path in _named_files(cfg):
        _digest_named(digest, path)
    return digest.hexdigest()


class RunCache:
    """Run folders by config hash under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / key[:2] / key

    def summary(self, key: str) -> dict | None:
        """The cached run's summary, or None when there is no complete run for `key`."""
        summary = try_summary(self.path(key))
        return None if summary is None else dict(summary)

    def staging(self, key: str) -> Path:
        """A fresh temporary folder beside the final one, for a run being written."""
        tmp = self.root / key[:2] / f".tmp-{key[:16]}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        return tmp

    def commit(self, key: str, staged: Path) -> Path:
        """Move a finished staged run into place (replacing an older entry); returns its final folder."""
        final = self.path(key)
        if final.exists():
            shutil.rmtree(final)
        os.replace(staged, final)
        return final
