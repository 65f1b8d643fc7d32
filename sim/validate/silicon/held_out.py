"""Each row simulated with the front-end time fitted without its own model: the matrix the issue's targets are
scored on ("each model scored with its own model left out of any fit").

`python -m sim.validate.silicon held_out=<fit.json>[,<fit.json>...]`, where each <fit.json> is a document written by
`python -m sim.validate.silicon.fit ... out=<fit.json>` (several: each engine from the one that fits it, so engines
fitted on different bases, `fit ... engines=`, score together): for every serving preset of an engine it holds the
coefficients fitted on the other models' rows (`engines.<engine>.presets.<preset>.held_out_each.<model>`; an engine
with one model in the data holds them out by input length instead, `held_out_by`); a row takes those of the preset
it is simulated with (`support.plan_row`). A document with one fit for the engine
(`engines.<engine>.held_out_each`) applies it to every preset. A row of an engine the document does not fit keeps
its preset's values. Only the front-end keys change; the preset's path (`frontend_path`) and scheduler stay as
shipped.
"""
from __future__ import annotations

import json
from pathlib import Path

from inferplan.errors import InputError
from sim.validate.silicon.fit import KEYS
from sim.validate.silicon.support import RowPlan, plan_row
from sim.validate.silicon.table import SiliconRow



def _preset(row: SiliconRow) -> str | None:
    """The serving preset `row` is simulated with (None: a row the matrix cannot express)."""
    plan = plan_row(row)
    return plan.engine if isinstance(plan, RowPlan) else None


class HeldOut:
    """The held-out front-end keys of each row, read from a fit document."""

    def __init__(self, paths: Path | str | list) -> None:
        """`paths`: one fit document, or several (a list, or comma-separated): each engine's fits from the one
        document that holds it (an engine in two is refused)."""
        if isinstance(paths, (str, Path)):
            paths = [p for p in str(paths).split(",") if p]
        self.path = ",".join(str(p) for p in paths)
        self.by: dict[str, str] = {}
        # engine -> preset (None: every preset of the engine) -> held-out value -> front-end keys
        self.keys: dict[str, dict[str | None, dict[str, dict[str, float]]]] = {}
        self.source: dict[str, str] = {}
        for path in paths:
            self._read(Path(path))

    def _read(self, path: Path) -> None:
        where = str(path)
        try:
            doc = json.loads(Path(path).read_text())
        except OSError as err:
            raise InputError(where, "held_out", f"cannot read it: {err.strerror}",
                             "give a file written by python -m sim.validate.silicon.fit ... out=<file>") from None
        except json.JSONDecodeError as err:
            raise InputError(where, "held_out", f"not JSON ({err.msg}, line {err.lineno})",
                             "give a file written by python -m sim.validate.silicon.fit ... out=<file>") from None
        engines = doc.get("engines") if isinstance(doc, dict) else None
        if not isinstance(engines, dict) or not engines:
            raise InputError(where, "engines", "no engine fits in it",
                             "give a file written by python -m sim.validate.silicon.fit ... out=<file>")
        for engine, fit in engines.items():
            presets = fit.get("presets") if isinstance(fit, dict) else None
            fits = ({p: f.get("held_out_each") if isinstance(f, dict) else None for p, f in presets.items()}
                    if isinstance(presets, dict) and presets else
                    {None: fit.get("held_out_each") if isinstance(fit, dict) else None})
            for preset, each in fits.items():
                if not isinstance(each, dict) or fit.get("held_out_by") not in ("model", "isl_tokens"):
                    field = f"engines.{engine}" + (f".presets.{preset}" if preset else "") + ".held_out_each"
                    raise InputError(where, field, "missing",
                                     "refit with the current python -m sim.validate.silicon.fit")
            if engine in self.source:
                raise InputError(where, f"engines.{engine}", f"also fitted in {self.source[engine]}",
                                 "give each engine's fit in one document only (fit ... engines=<the others>)")
            self.source[engine] = where
            self.by[engine] = fit["held_out_by"]
            self.keys[engine] = {p: {str(k): {n: float(v.get(n, 0.0)) for n in KEYS} for k, v in each.items()}
                                 for p, each in fits.items()}

    def engine_keys(self, row: SiliconRow) -> dict | None:
        """The front-end keys `row` is simulated with (None: its preset's own, for an engine not fitted here)."""
        fits = self.keys.get(row.engine)
        if fits is None:
            return None
        preset = None if None in fits else _preset(row)
        if preset not in fits:
            raise InputError(self.path, f"engines.{row.engine}.presets",
                             f"no fit of the preset {preset!r} that row {row.id} is simulated with",
                             "refit on rows that include that preset's")
        table = fits[preset]
        held = str(row.model) if self.by[row.engine] == "model" else str(float(row.isl_tokens))
        if held not in table:
            held = str(int(row.isl_tokens)) if self.by[row.engine] == "isl_tokens" else held
        if held not in table:
            raise InputError(self.path, f"engines.{row.engine}.held_out_each",
                             f"no coefficients fitted without {held!r} (row {row.id})",
                             "refit on rows that include that model")
        return table[held]

    def check(self, rows: list[SiliconRow]) -> None:
        """Every row the matrix will simulate has its held-out keys (an `InputError` naming the first that lacks
        them), so a run never stops half-way on the document."""
        for row in rows:
            if row.engine in self.keys and isinstance(plan_row(row), RowPlan):
                self.engine_keys(row)
