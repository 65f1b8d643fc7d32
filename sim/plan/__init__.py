"""The capacity planner: `python -m sim.plan` finds the cheapest fleet and policy that meets a scenario's SLOs.

Read first: `planner.py` (one plan end to end), `search.py` (bisection of instance counts along lines of the other
choices, in parallel rounds), `evaluate.py` (compose -> cache -> simulate). Around them: `space.py` (the
`search.<key>=<choices>` syntax), `options.py` (the command line), `cache.py` (results by config hash),
`executors.py` (inline, local processes, Ray), `slo.py` (checks and margins), `confidence.py` (each latency's
error band from the validation matrix), `seeds.py` (the choice on more traffic seeds), `month.py` (the month
priced from the traffic curve), `result.py` (chosen, point-estimate choice, next cheaper, frontier, plan.json),
`output.py` (the plan folder), `console.py` (progress, verdict and report), `deploy/` (the chosen configuration
as launch commands, Kubernetes objects and a bill of materials). See docs/planning.md.
"""
from sim.plan.options import PlanOptions, PlanRequest, parse_args
from sim.plan.planner import plan

__all__ = ["PlanOptions", "PlanRequest", "parse_args", "plan"]
