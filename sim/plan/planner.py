"""One plan end to end: validate the request, search (each configuration with its N+1 failure run when redundancy
is asked: sim/plan/redundancy.py) at the plan's confidence and at the point estimate (sim/plan/confidence.py),
check the choice on more traffic seeds (sim/plan/seeds.py), price each month from the traffic curve
(sim/plan/month.py), rank, write the plan folder."""
from __future__ import annotations

import signal
import time
from datetime import datetime
from pathlib import Path

from inferplan.errors import InputError
from inferplan.interrupts import Interrupted, signals_deferred, signum_of
from sim.compose import compose_config
from sim.config import load_run_config
from sim.plan.cache import RunCache
from sim.plan.confidence import Bands, parse_confidence
from sim.plan.console import PlanProgress
from sim.plan.evaluate import Evaluator
from sim.plan.executors import make_executor
from sim.plan.month import monthly_from_curve
from sim.plan.options import PlanRequest
from sim.plan.output import run_dirs, write_plan_folder
from sim.plan.redundancy import failure_overrides, redundant_pools
from sim.plan.result import choose, choose_point, plan_json, rank
from sim.plan.search import pool_is_fixed, run_search
from sim.plan.seeds import SeedRunner, choose_over_seeds
from sim.plan.space import SearchSpace, parse_space


# Documented default searches for scenarios whose fleet is autoscaled (docs/planning.md, "With no search
# argument"): the knobs the scenario's diagnosis names, over the traffic window where it misses. ecommerce_peak: the
# reactive L40S pool shrinks before the flash sale (cause autoscaler_lag on product_qa TPOT), so its floor
# (`min_instances`) is searched from the pool's own minimum to its maximum, on the sale's whole window (19:55 to
# 20:35: the ramp, the 10-minute hold and the decay; `flash_sales` in conf/scenario/ecommerce_peak.yaml), not
# only its first ten minutes.
SCENARIO_DEFAULTS: dict[str, dict[str, list[str]]] = {
    "ecommerce_peak": {
        "overrides": ["scenario.traffic.transforms=[{kind:window,start_s:1500,end_s:3900}]"],
        "search": ["search.scenario.pools.l40s_int4.min_instances=range(4,33,4)"],
    },
}


def default_space(run) -> SearchSpace:
    """With no `search.` argument: the scenario's documented default (SCENARIO_DEFAULTS), else every fixed-size
    pool's instance count over 1 .. 2n (n: the scenario's count)."""
    known = SCENARIO_DEFAULTS.get(run.scenario.name)
    if known is not None:
        return parse_space(known["search"])
    args = [f"search.scenario.pools.{name}.instances=range(1,{2 * max(p.instances, 1) + 1})"
            for name, p in run.pools.items()
            if run.fleet.autoscaler(name).name == "fixed"]
    return parse_space(args)


def default_overrides(scenario: str) -> list[str]:
    """The overrides a scenario's default search runs with (its traffic window), before the user's own."""
    return list(SCENARIO_DEFAULTS.get(scenario, {}).get("overrides", []))


def validate(base: list[str], space: SearchSpace):
    """Compose and validate the base configuration and every choice (each with the other dimensions at their first
    choice) before anything runs, so a typo fails in a second with one line; returns the base RunConfig."""
    run = load_run_config(compose_config([*base, *space.first_overrides()]))
    for dim in space.dimensions:
        if dim.is_count:
            if dim.pool not in run.pools:
                raise InputError("command line", f"search.{dim.key}", f"the scenario has no pool {dim.pool!r}",
                                 f"use one of: {', '.join(run.pools)}")
            continue
        others = [d.override(0) for d in space.dimensions if d is not dim]
        for i in range(1, len(dim.values)):
            load_run_config(compose_config([*base, *others, dim.override(i)]))
    return run


def plan(request: PlanRequest, command: str) -> tuple[dict, Path]:
    """Run the plan `request` describes; returns (plan.json's content, its path)."""
    opts, space = request.options, request.space
    base = list(request.overrides)
    run = validate(base, space)
    scenario = run.scenario.name
    defaulted = not space.dimensions
    if defaulted:
        space = default_space(run)
        if scenario in SCENARIO_DEFAULTS:
            base = default_overrides(scenario) + base
            run = validate(base, space)
    started = time.perf_counter()
    created = datetime.now()
    out_dir = Path(opts.out_dir or f"plans/{scenario}/{created:%Y-%m-%d_%H-%M-%S}")
    companion = failure_overrides(run, opts.redundancy)   # each configuration's N+1 failure run, if asked
    if companion:   # (its overrides checked like the rest, before anything runs)
        load_run_config(compose_config([*base, *space.first_overrides(), *companion]))
    executor = make_executor(opts.ray_address, opts.jobs)
    progress = PlanProgress(str(opts.progress))
    evaluator = Evaluator(tuple(base), RunCache(Path(opts.cache_dir)), executor, opts.cache, progress, companion)
    bands = Bands.load(parse_confidence(opts.confidence))
    seeds = SeedRunner(evaluator, opts.seeds, bands)
    passed_over: set[int] = set()
    interrupted = None
    try:
        outcomes, notes = run_search(space, evaluator, executor.workers, bands)
        if bands is not None:   # the point-estimate choice too (memoised: only what is new is simulated)
            outcomes, more = run_search(space, evaluator, executor.workers, None)
            notes += [n for n in more if n not in notes]
        if opts.seeds > 1:
            rows = rank(outcomes, opts.objective, bands)
            passed_over, seed_notes = choose_over_seeds(rows, seeds, choose)
            notes += seed_notes
            point = choose_point(rows)
            if point is not None:
                seeds.check(point.outcome)
    except KeyboardInterrupt as stop:   # keep every configuration that finished; the cache resumes the rest
        interrupted = stop
        outcomes = sorted((o for o in evaluator.outcomes.values() if o.summary is not None or o.status == "invalid"),
                          key=lambda o: o.id)
        notes = [f"interrupted ({signal.Signals(signum_of(stop)).name}) after {len(outcomes)} configurations: "
                 "the search is incomplete; re-run the same command to resume from the cache"]
    finally:
        progress.close()
        executor.close(abort=interrupted is not None)
    runs = [*outcomes, *(o.failure_run for o in outcomes if o.failure_run is not None)]
    jobs = {"configurations": len(outcomes), "simulated": evaluator.simulated,
            "cached": sum(o.cached for o in runs), "invalid": sum(o.status == "invalid" for o in outcomes),
            "runs_per_configuration": 2 if companion else 1, "seed_runs_simulated": seeds.simulated,
            "search_space_size": space.size, "backend": executor.backend, "workers": executor.workers,
            "wall_time_s": time.perf_counter() - started}
    doc = plan_json(scenario=scenario, command=command, created=created.isoformat(timespec="seconds"),
                    objective=opts.objective, base=base, dimensions=[d.describe() for d in space.dimensions],
                    rows=rank(outcomes, opts.objective, bands), jobs=jobs, notes=notes, run_dirs=run_dirs(outcomes),
                    status="interrupted" if interrupted is not None else "completed", bands=bands,
                    months=months_from_curve(outcomes, notes), seeds=seeds.checked, passed_over=passed_over,
                    seeds_asked=opts.seeds)
    if defaulted and scenario in SCENARIO_DEFAULTS:
        doc["notes"].insert(0, f"no search.* argument: the documented default for {scenario} "
                               f"({' '.join(SCENARIO_DEFAULTS[scenario]['search'])} with "
                               f"{' '.join(default_overrides(scenario))}; docs/planning.md)")
    elif defaulted:
        doc["notes"].insert(0, "no search.* argument: sized every fixed-size pool over 1 .. 2x its scenario count")
    doc["redundancy"] = {"pools": redundant_pools(companion), "overrides": list(companion)} if companion else None
    if companion:
        doc["notes"].append(f"redundancy n+1 on {', '.join(redundant_pools(companion))}: each configuration also ran "
                            "with one instance of each failed at the traffic's peak (replacement asked for one cold "
                            "start later); it passes only if both runs meet every SLO")
    for d, dim in zip(doc["search"], space.dimensions):
        d["bisected"] = dim is space.bisected
    with signals_deferred():
        path = write_plan_folder(out_dir, outcomes, base, doc)
    if interrupted is not None:
        raise PlanInterrupted(signum_of(interrupted), path, len(outcomes))
    return doc, path


def months_from_curve(outcomes, notes: list[str]) -> dict[int, dict]:
    """Each completed configuration's month from the traffic curve (sim/plan/month.py), by id; a run whose
    folder cannot be read keeps the window x 730 h projection, with a note."""
    months = {}
    for o in outcomes:
        if o.status != "completed" or o.run_dir is None or not o.summary:
            continue
        fixed = {p for p in o.config["scenario"]["pools"] if pool_is_fixed(o.config, p)}
        try:
            months[o.id] = monthly_from_curve(o.config, o.summary, o.run_dir, fixed)
        except (OSError, KeyError, ValueError, InputError) as err:
            notes.append(f"#{o.id}: month not priced from the traffic curve ({err}); the window x 730 h stays")
    return months


class PlanInterrupted(Interrupted):
    """The plan stopped on SIGINT/SIGTERM; `plan.json` (`status: interrupted`) holds what had finished."""

    def __init__(self, signum: int, path: Path, configurations: int) -> None:
        super().__init__(signum)
        self.path, self.configurations = path, configurations
