"""The search: along every line (space.py), find the fewest instances that meet the SLOs, in parallel rounds.

Round 0 simulates each line at its largest count: a line that fails there is pruned (with a fixed-size pool, fewer
instances cannot do better). Then each round bisects every open line, splitting its open interval at `w` points
at once, `w = max(1, workers // open lines)`: with one line and 4 workers that is 5-section search, 4 simulations
per round. A line ends when its smallest passing count is next to a failing one (or is its smallest count).

Monotonicity is assumed only where it holds by construction: a line whose bisected pool is autoscaled (its
`instances` is only the starting size) is enumerated instead. An observation against it (a failing count above a
passing one) is reported in the plan's notes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from sim.plan.evaluate import Evaluator, Outcome
from sim.plan.redundancy import passes
from sim.plan.space import Line, SearchSpace


def pool_is_fixed(config: dict, pool: str) -> bool:
    """True when `pool` keeps its size (its own autoscaler, else the autoscaler group, is `fixed`)."""
    spec = (config.get("scenario", {}).get("pools", {}).get(pool) or {}).get("autoscaler") or config.get("autoscaler")
    return str((spec or {}).get("name", (config.get("autoscaler") or {}).get("name", "fixed"))) == "fixed"


@dataclass
class LineSearch:
    """The state of one line: every index below `lo` fails, `hi` passes (None: not known yet)."""

    line: Line
    lo: int = 0
    hi: int | None = None
    monotone: bool = True
    done: bool = False
    seen: dict[int, bool] = field(default_factory=dict)   # index -> meets the SLOs

    @property
    def n(self) -> int:
        return 1 if self.line.count is None else len(self.line.count.values)

    def probes(self, width: int) -> list[int]:
        """Indices to simulate next (empty once done)."""
        if self.done:
            return []
        if not self.seen:
            return [self.n - 1]
        if not self.monotone:
            return [i for i in range(self.n) if i not in self.seen]
        span = self.hi - self.lo                  # open indices: lo .. hi-1; `width` cuts at once
        picks = sorted({self.lo + (j * span) // (width + 1) for j in range(1, width + 1)})
        return [i for i in picks if i not in self.seen]

    def update(self, results: dict[int, bool], notes: list[str]) -> None:
        self.seen.update(results)
        if not self.monotone:
            self.done = len(self.seen) == self.n
            return
        passing = [i for i, ok in self.seen.items() if ok]
        failing = [i for i, ok in self.seen.items() if not ok]
        if not passing:                       # fails at its largest count: pruned
            self.done = True
            return
        self.hi = min(passing)
        below = [i for i in failing if i < self.hi]
        self.lo = max(below) + 1 if below else 0
        above = [i for i in failing if i > self.hi]
        if above and self.line.count is not None:
            vals = self.line.count.values
            notes.append(f"{' '.join(self.line.fixed) or '(base)'}: {self.line.count.key}={vals[self.hi]} meets the "
                         f"SLOs but {', '.join(str(vals[i]) for i in sorted(above))} do not (not monotone)")
        self.done = self.lo >= self.hi


def run_search(space: SearchSpace, evaluator: Evaluator, workers: int, bands=None) -> tuple[list[Outcome], list[str]]:
    """Search every line for the fewest instances that pass at the confidence of `bands` (confidence.Bands; None:
    the point estimate); returns every outcome the evaluator holds (in evaluation order) and notes for the plan.
    Run it once per criterion: the evaluator's memo makes the second search simulate only what is new."""
    searches = [LineSearch(line) for line in space.lines()]
    notes: list[str] = []
    while True:
        open_ = [s for s in searches if not s.done]
        if not open_:
            break
        width = max(1, workers // len(open_))
        plan = [(s, i) for s in open_ for i in s.probes(width)]
        outcomes = evaluator.evaluate([s.line.overrides(i) for s, i in plan])
        per_line: dict[int, dict[int, bool]] = {}
        for (s, i), out in zip(plan, outcomes):
            per_line.setdefault(id(s), {})[i] = passes(out, bands)  # (with its N+1 failure run, when asked)
            if s.line.count is not None and not s.seen and out.config:
                s.monotone = pool_is_fixed(out.config, s.line.count.pool)
        for s in open_:
            s.update(per_line.get(id(s), {}), notes)
    return sorted(evaluator.outcomes.values(), key=lambda o: o.id), notes
