"""The planner's own options and the split of its command line into options, fixed overrides and the search.

`python -m sim.plan [key=value ...]`: a key named in `PlanOptions` is a planner option; `search.<key>=<choices>`
is a search dimension (space.py); anything else is a Hydra override applied to every configuration.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass


from inferplan.config.yaml_files import yaml_value
from inferplan.errors import InputError
from sim.config import build
from sim.plan.confidence import parse_confidence
from sim.plan.space import SEARCH_PREFIX, SearchSpace, parse_space

OBJECTIVES = ("usd", "usd_per_million_output_tokens", "node_hours")


@dataclass(frozen=True)
class PlanOptions:
    jobs: int | None = None             # simulations at once; default: this machine's CPUs, or the Ray cluster's
    ray_address: str | None = None      # run on Ray: `local` (start one here), `auto`, `ray://<head>:10001`
    out_dir: str | None = None          # default: plans/<scenario>/<YYYY-mm-dd_HH-MM-SS>
    cache_dir: str = "plans/.cache"     # finished runs by config hash; a repeated plan only simulates what is new
    cache: bool = True                  # false: simulate every configuration again (and refresh the cache)
    objective: str = "usd"              # what "cheapest" means: one of OBJECTIVES (summary.json cost figures)
    progress: str = "auto"              # auto (a bar when stderr is a terminal), true, false
    mode: str = "search"                # search | day (handled by sim/plan/day before these options are read)
    check: bool = False                 # the gate, as `python -m sim check=true`: exit 1 when no configuration meets
                                        # every SLO (the plan's exit status is 1 then anyway; accepted for one syntax)
    deploy: str | None = None           # a folder: the chosen configuration's launch commands, Kubernetes objects,
                                        # autoscaler, gateway settings and bill of materials (sim/plan/deploy)
    redundancy: str = "none"            # n+1: every pool must also meet the SLOs with one instance failed at the
                                        # traffic's peak (sim/plan/redundancy.py); a pool's own `redundancy:` wins
    confidence: str = "0.9"             # meet every SLO with each latency x its error band at this level (0.5, 0.8,
                                        # 0.9, 0.95; sim/plan/confidence.py); 0 or none: the point estimate only
    seeds: int = 3                      # the choice re-simulated on this many traffic seeds (the base seed + N-1;
                                        # sim/plan/seeds.py); 1: off

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise InputError("command line", "objective", f"unknown objective {self.objective!r}",
                             f"use one of: {', '.join(OBJECTIVES)}")
        if self.jobs is not None and self.jobs < 1:
            raise InputError("command line", "jobs", f"must be >= 1, got {self.jobs}", "use e.g. jobs=4")
        if self.mode not in ("search", "day"):
            raise InputError("command line", "mode", f"unknown mode {self.mode!r}", "use mode=search or mode=day")
        if self.redundancy not in ("none", "n+1"):
            raise InputError("command line", "redundancy", f"unknown redundancy {self.redundancy!r}",
                             "use redundancy=n+1 or redundancy=none")
        if self.seeds < 1:
            raise InputError("command line", "seeds", f"must be >= 1, got {self.seeds}",
                             "use seeds=3, or seeds=1 (off)")
        parse_confidence(self.confidence)
        if str(self.progress) not in ("auto", "true", "false", "True", "False"):
            raise InputError("command line", "progress", f"unknown value {self.progress!r}", "use auto, true or false")


OPTION_NAMES = tuple(f.name for f in dataclasses.fields(PlanOptions))


@dataclass(frozen=True)
class PlanRequest:
    options: PlanOptions
    overrides: tuple[str, ...]      # fixed for every configuration (scenario=... included)
    space: SearchSpace


def parse_args(argv: list[str]) -> PlanRequest:
    """Split `argv` (each `key=value`) into options, fixed overrides and search dimensions."""
    options, overrides, search = {}, [], []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep and arg.startswith("~"):     # a Hydra deletion: `~scenario.traffic.lengths`
            overrides.append(arg)
            continue
        if not sep:
            raise InputError("command line", arg, "is not key=value",
                             "e.g. scenario=smoke \"search.scenario.pools.main.instances=range(1,9)\"")
        if key.startswith(SEARCH_PREFIX):
            search.append(arg)
        elif key in OPTION_NAMES:
            options[key] = yaml_value(value, "command line", key)
        elif key.lstrip("+~").startswith("hydra.") or key.startswith("hydra/"):
            raise InputError("command line", key, "Hydra's own settings do not apply to the planner",
                             "use out_dir=... for the plan folder and jobs=... for parallelism")
        else:
            overrides.append(arg)
    if isinstance(options.get("progress"), bool):
        options["progress"] = str(options["progress"]).lower()
    if "confidence" in options:
        options["confidence"] = str(options["confidence"]).lower()
    for name in ("ray_address", "out_dir", "cache_dir", "deploy"):
        if options.get(name) is not None:
            options[name] = str(options[name])
    return PlanRequest(build(PlanOptions, options, "command line"), tuple(overrides), parse_space(search))
