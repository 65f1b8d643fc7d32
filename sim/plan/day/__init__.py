"""The day plan: `python -m sim.plan scenario=deepseek_v3_day mode=day` sizes a prefill/decode fleet for every
window of a day of traffic, first by capacity arithmetic over the cost model, then by simulating each window.

Read first: `planner.py` (the plan end to end), `capacity.py` (units per window from step costs), `verify.py`
(one window simulated with warm-up, measured after it). Around them: `traffic.py` (the day's windows and the
per-request statistics of the scenario's traffic), `options.py` (the command line), `report.py` (day figures,
`day_plan.json`, the comparison with the published day), `published.py` (reference figures, used only there).
See docs/planning.md ("Day plan").
"""
