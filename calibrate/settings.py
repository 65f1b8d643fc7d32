"""What one calibration run is asked to do: the typed, validated form of `conf/calibrate.yaml`.

Kept free of torch so that configuration mistakes are reported before anything heavy is imported.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from calibrate import ops
from inferplan.errors import InputError

CONFIG = "conf/calibrate.yaml"


@dataclass(frozen=True)
class Settings:
    """What to calibrate and how; mirrors `conf/calibrate.yaml` (see its comments for each key)."""

    hardware: str
    model: str
    out_dir: Path
    ops: tuple[str, ...] | None = None
    dtypes: tuple[str, ...] | None = None
    tp: int = 1
    ep: int = 1
    grid: str = "auto"
    budget_s: float = 150.0
    install: bool = False
    peaks: str = "measured"
    holdout_every: int = 4
    threads: int | None = None
    device: str = "auto"
    impls: str = "auto"
    progress: bool = True
    allow_device_mismatch: bool = False

    def validate(self) -> None:
        bad_ops = [o for o in (self.ops or ()) if o not in ops.OPS]
        if bad_ops:
            raise InputError(CONFIG, "ops", f"unknown op {bad_ops[0]!r}", f"use some of: {', '.join(ops.OPS)}")
        bad_dtypes = [d for d in (self.dtypes or ()) if d not in ops.DTYPES]
        if bad_dtypes:
            raise InputError(CONFIG, "dtypes", f"unknown dtype {bad_dtypes[0]!r}",
                             f"use some of: {', '.join(ops.DTYPES)}")
        from calibrate.shapes import GRIDS  # torch-free

        if self.grid != "auto" and self.grid not in GRIDS:
            raise InputError(CONFIG, "grid", f"unknown grid {self.grid!r}", f"use one of: auto, {', '.join(GRIDS)}")
        checks = [("budget_s", self.budget_s > 0, "a positive number of seconds"),
                  ("tp", self.tp >= 1, "an integer >= 1"), ("ep", self.ep >= 1, "an integer >= 1"),
                  ("holdout_every", self.holdout_every >= 2, "an integer >= 2 (every k-th shape held out)"),
                  ("threads", self.threads is None or self.threads >= 1, "null (all cores) or >= 1"),
                  ("peaks", self.peaks in ("measured", "datasheet"), "measured or datasheet"),
                  ("device", self.device in ("auto", "cpu", "cuda"), "auto, cpu or cuda"),
                  ("impls", self.impls in ("auto", "cpu", "cuda"), "auto, cpu or cuda")]
        for key, ok, fix in checks:
            if not ok:
                raise InputError(CONFIG, key, f"invalid value {getattr(self, key)!r}", f"give {fix}")
