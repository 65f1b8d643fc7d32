"""Seeds: the chosen configuration (and the point-estimate choice) re-simulated on other traffic seeds.

The search ranks every configuration on one seed (the config's `seed`, 0 by default). A choice that passes on that
seed's traffic by a hair may fail on the next draw of the same traffic. With `seeds=N` (default 3) the plan runs
the choice again with `seed=<base + 1>` .. `seed=<base + N - 1>` (with its N+1 failure run when redundancy is
asked), through the planner's evaluator and run cache (a repeated plan re-uses them; Ctrl-C keeps what finished),
and reports per SLO check the min / median / max over the seeds and whether every seed meets at the plan's
confidence.

What the planner does when the choice fails on another seed: it moves to the next-cheaper evaluated configuration
that meets on the base seed and checks that one on the seeds, up to MAX_CANDIDATES choices; the first that meets
on every seed is chosen, and each one passed over is named in the notes. When none of them does, the cheapest one
stays chosen, flagged (`seeds.all_meet: false`), and the note says to widen the search. Only configurations the
search evaluated are candidates: a count between two evaluated ones is not simulated for this.
"""
from __future__ import annotations

import statistics

from sim.plan.evaluate import Evaluator, Outcome
from sim.plan.redundancy import passes
from sim.plan.slo import slo_checks

MAX_CANDIDATES = 3


def without_seed(overrides: tuple[str, ...]) -> tuple[str, ...]:
    """Overrides minus a `seed=` one (the seed runs set their own; Hydra refuses two values for one key)."""
    return tuple(a for a in overrides if a.lstrip("+~").partition("=")[0] != "seed")


def base_seed(outcome: Outcome) -> int:
    return int((outcome.config or {}).get("seed", 0) or 0)


def spread(runs: list[tuple[int, Outcome]], bands) -> dict:
    """plan.json `seeds`: per seed its verdict, per SLO check the spread of the point estimate."""
    per_check: dict[str, list[float]] = {}
    targets: dict[str, float] = {}
    out_runs = []
    for seed, o in runs:
        checks = slo_checks(o.summary, o.config, bands) if o.summary else []
        for c in checks:
            name = f"{'fleet' if c.request_class == '*' else c.request_class} {c.name}"
            targets[name] = c.target
            if c.achieved is not None:
                per_check.setdefault(name, []).append(c.achieved)
        done = o.status == "completed"
        out_runs.append({"seed": seed, "status": o.status, "meets": done and passes(o, bands),
                         "meets_at_point_estimate": done and passes(o),
                         "usd": ((o.summary or {}).get("cost") or {}).get("usd"),
                         "failed": [f"{c.request_class} {c.name}" for c in checks if not c.met_at_confidence],
                         "run_dir": str(o.run_dir or ""), "config_hash": o.key, "cached": o.cached,
                         "error": o.error})
    return {"seeds": [s for s, _ in runs], "runs": out_runs, "all_meet": all(r["meets"] for r in out_runs),
            "all_meet_at_point_estimate": all(r["meets_at_point_estimate"] for r in out_runs),
            "spread": {k: {"min": min(v), "median": statistics.median(v), "max": max(v), "target": targets[k],
                           "seeds": len(v)} for k, v in sorted(per_check.items())}}


class SeedRunner:
    """Re-simulates configurations on `seeds - 1` more seeds through its own memo (the seed runs are not
    configurations of the search) on the plan's cache and executor."""

    def __init__(self, evaluator: Evaluator, seeds: int, bands) -> None:
        self.seeds, self.bands = seeds, bands
        self.evaluator = Evaluator(without_seed(evaluator.base), evaluator.cache, evaluator.executor,
                                   evaluator.use_cache, evaluator.progress, evaluator.companion)
        self.checked: dict[int, dict] = {}   # configuration id -> spread(); filled as each finishes

    @property
    def simulated(self) -> int:
        return self.evaluator.simulated

    def check(self, outcome: Outcome) -> dict:
        """The spread of `outcome` over its seeds (memoised by configuration id)."""
        if outcome.id in self.checked:
            return self.checked[outcome.id]
        first = base_seed(outcome)
        extra = [first + k for k in range(1, self.seeds)]
        others = self.evaluator.evaluate([(*outcome.overrides, f"seed={s}") for s in extra])
        self.checked[outcome.id] = spread([(first, outcome), *zip(extra, others)], self.bands)
        return self.checked[outcome.id]


def choose_over_seeds(rows: list, runner: SeedRunner, choose) -> tuple[set[int], list[str]]:
    """Check the choice on the seeds, moving to the next candidate while it fails (see the module docstring).
    `choose(rows, exclude)` -> (chosen row or None, ...). Returns (ids passed over, notes)."""
    passed_over: set[int] = set()
    notes: list[str] = []
    tried = []
    for _ in range(MAX_CANDIDATES):
        chosen = choose(rows, passed_over)[0]
        if chosen is None:
            break
        result = runner.check(chosen.outcome)
        tried.append(chosen)
        if result["all_meet"]:
            break
        failing = [str(r["seed"]) for r in result["runs"] if not r["meets"]]
        notes.append(f"#{chosen.id} ({' '.join(chosen.outcome.overrides) or 'base'}) meets on the base seed but not "
                     f"on seed {', '.join(failing)}: passed over for the next-cheaper configuration")
        passed_over.add(chosen.id)
    if tried and not runner.checked[tried[-1].id]["all_meet"]:
        notes.append(f"none of the {len(tried)} cheapest passing configurations meets on every seed: the cheapest "
                     "stays chosen, flagged; widen the search (more instances) for a choice robust to the traffic "
                     "draw")
        passed_over -= {t.id for t in tried}
    return passed_over, notes
