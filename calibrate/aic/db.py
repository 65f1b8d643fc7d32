"""`AicDb`: reads NVIDIA AIConfigurator's performance database (a `systems/` folder) as it is laid out.

    systems/<system>.yaml                                        hardware facts (we read only `data_dir`)
    systems/data/<system>/<family>/<framework>/<version>/
        <table>.parquet                                          measured rows
        reuse.yaml                                               tables this version takes from another version
        collection_meta.yaml                                     runtime (framework, version, image) per table

A version folder's table is its own rows plus, where `reuse.yaml` names a donor version for that table, the
donor's rows at shapes the folder did not measure (AIConfigurator keeps the active version's rows on a key
conflict); reuse chains are followed. Each row keeps the version that measured it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
from packaging.version import InvalidVersion, Version

from calibrate.aic.names import (ATTN_DTYPES, BMM_DTYPES, ENGINE_FAMILIES, ENGINES, GEMM_DTYPES, HARDWARE, MOE_DTYPES, SYSTEMS,
                                 TABLES)
from inferplan.config.yaml_files import read_yaml, read_yaml_mapping
from inferplan.errors import InputError

FIX = "give AIConfigurator's `systems` folder (with <system>.yaml and data/<system>/...)"
# The column holding a table's number format: what decides whether a row can be imported.
FORMAT_COLUMN = {"gemm": ("gemm_dtype", GEMM_DTYPES), "attn_prefill": ("kv_cache_dtype", ATTN_DTYPES),
                 "attn_decode": ("kv_cache_dtype", ATTN_DTYPES), "moe": ("moe_dtype", MOE_DTYPES),
                 "mla_prefill": ("kv_cache_dtype", ATTN_DTYPES), "mla_decode": ("kv_cache_dtype", ATTN_DTYPES),
                 "mla_bmm": ("bmm_dtype", BMM_DTYPES)}


def version_key(v: str) -> tuple:
    """Sort key of a version folder name (PEP 440 where it parses: 1.3.0rc20 > 1.3.0rc10, 0.5.6.post2 > 0.5.6)."""
    try:
        return (1, Version(v))
    except InvalidVersion:
        return (0, v)


@dataclass(frozen=True)
class TableSource:
    """Where one family's rows come from: the version asked for and, per file, the version that measured it."""

    family: str
    framework: str
    version: str
    files: tuple[tuple[str, str], ...]  # (path, measuring version), the asked version's own file first
    meta: dict


class AicDb:
    def __init__(self, systems: str | Path) -> None:
        self.root = Path(systems)
        if not (self.root / "data").is_dir():
            raise InputError(self.root, "path", "not an AIConfigurator systems folder (no data/)", FIX)

    def system(self, hardware: str) -> str:
        """The database's system name for our hardware name (or theirs)."""
        name = SYSTEMS.get(hardware, hardware if hardware in HARDWARE else None)
        if name is None or not (self.root / "data" / name).is_dir():
            have = sorted(HARDWARE[s] for s in HARDWARE if (self.root / "data" / s).is_dir())
            raise InputError(self.root, "--hardware", f"no data for {hardware!r}", f"valid: {', '.join(have)}")
        return name

    def _dir(self, system: str, family: str, framework: str) -> Path:
        return self.root / "data" / system / TABLES[family][0] / framework

    def versions(self, system: str, family: str, framework: str) -> list[str]:
        """Version folders of a family and framework that have the family's table (own or reused), oldest first."""
        d = self._dir(system, family, framework)
        if not d.is_dir():
            return []
        return sorted((v.name for v in d.iterdir() if v.is_dir() and self._files(system, family, framework, v.name)),
                      key=version_key)

    def _files(self, system: str, family: str, framework: str, version: str, seen: tuple = ()) -> list[tuple[str, str]]:
        stem = TABLES[family][1]
        folder = self._dir(system, family, framework) / version
        out = []
        own = folder / f"{stem}.parquet"
        if own.is_file():
            out.append((str(own), version))
        reuse = folder / "reuse.yaml"
        if reuse.is_file() and version not in seen:
            for entry in read_yaml_mapping(reuse).get("reuse") or []:
                if entry.get("table") == stem and entry.get("from_version"):
                    out += self._files(system, family, framework, str(entry["from_version"]), seen + (version,))
        return out

    def source(self, system: str, family: str, framework: str, version: str | None = None) -> TableSource | None:
        """The newest version's table (or the newest at or below `version`), None when there is none."""
        have = self.versions(system, family, framework)
        if version is not None:
            have = [v for v in have if version_key(v) <= version_key(version)]
        if not have:
            return None
        v = have[-1]
        files = tuple(self._files(system, family, framework, v))
        meta_file = self._dir(system, family, framework) / v / "collection_meta.yaml"
        meta = read_yaml(meta_file) if meta_file.is_file() else {}
        runtime = (meta or {}).get("runtime") or {}
        table_meta = ((meta or {}).get("tables") or {}).get(TABLES[family][1]) or {}
        keep = {k: str(runtime[k]) for k in ("framework", "version", "image", "image_digest") if k in runtime}
        keep.update({k: str(table_meta[k]) for k in ("collector_ref", "collected_at") if k in table_meta})
        return TableSource(family, framework, v, files, keep)

    def source_every_version(self, system: str, family: str, framework: str) -> TableSource | None:
        """The newest version's table with every older version's files after it as donors (their rows fill the
        shapes the newer ones did not measure: `convert` keeps the newest measurement of a shape). None when no
        version has the table."""
        newest = self.source(system, family, framework)
        if newest is None:
            return None
        files = list(newest.files)
        for v in reversed(self.versions(system, family, framework)[:-1]):
            files += [f for f in self._files(system, family, framework, v) if f not in files]
        return TableSource(family, framework, newest.version, tuple(files), newest.meta)

    def has_table(self, system: str, family: str) -> bool:
        """Whether any framework's folder of this system holds the family's table (own or reused)."""
        base = self.root / "data" / system / TABLES[family][0]
        if not base.is_dir():
            return False
        return any(self.versions(system, family, d.name) for d in base.iterdir() if d.is_dir())

    def read(self, src: TableSource) -> pd.DataFrame:
        """The table's rows (own first, then donors'), with `source_version`; columns as in the files (older
        files lack `window_size`: filled with 0)."""
        frames = []
        for path, measured in src.files:
            df = pq.read_table(path).to_pandas()
            df["source_version"] = measured
            frames.append(df)
        df = pd.concat(frames, ignore_index=True)
        if src.family in ("attn_prefill", "attn_decode") and "window_size" not in df:
            df["window_size"] = 0
        if "window_size" in df:
            df["window_size"] = df["window_size"].fillna(0)
        return df

    def importable_rows(self, src: TableSource) -> int:
        """Rows of the table in a number format we import (for choosing an engine: no de-duplication)."""
        col, names = FORMAT_COLUMN.get(src.family, (None, None))
        total = 0
        for path, _ in src.files:
            if col is None:
                total += pq.ParquetFile(path).metadata.num_rows
            else:
                total += int(pq.read_table(path, columns=[col]).column(col).to_pandas().isin(list(names)).sum())
        return total

    def default_engine(self, system: str) -> tuple[str, dict[str, int]]:
        """The engine whose newest versions hold the most importable rows over the engine-measured families
        (ties: the first of ENGINES), with every engine's count."""
        counts = {}
        for engine in ENGINES:
            n = 0
            for family in ENGINE_FAMILIES:
                src = self.source(system, family, engine)
                n += self.importable_rows(src) if src is not None else 0
            counts[engine] = n
        best = max(ENGINES, key=lambda e: (counts[e], -ENGINES.index(e)))
        if counts[best] == 0:
            raise InputError(self.root, "--engine", f"no engine has importable rows for {system}",
                             "check the systems folder")
        return best, counts
