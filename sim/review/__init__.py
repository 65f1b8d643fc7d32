"""Analysis of a finished run: per-class and per-pool verdicts, and a diagnosis of what missed and why.

Read first: `verdict.py` (the verdict records), `diagnosis.py` (window, cause, evidence, knobs to try),
`evidence.py` (what a run leaves for them). Called once at the end of a run by sim/results/summary.py, with the
engine's outcome (sim/core/outcome.py); the simulator core (sim/core) never imports this package.
"""
from __future__ import annotations

from sim.core.outcome import RunOutcome
from sim.review.diagnosis import diagnose
from sim.review.evidence import RunEvidence
from sim.review.verdict import verdicts


def review(run, outcome: RunOutcome, *, partial: bool = False) -> dict:
    """`{"verdict": [...], "diagnosis": [...]}` for `summary.json`; `partial`: the run was stopped before its end."""
    records = verdicts(outcome.requests, run.slo)
    ev = RunEvidence.from_run(run, outcome, partial=partial)
    return {"verdict": records, "diagnosis": diagnose(records, ev)}
