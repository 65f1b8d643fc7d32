"""The validation matrix on measured silicon: every row of a table of measured closed-loop serving runs (vLLM,
SGLang, TensorRT-LLM on H100, H200, ...) simulated as its columns document, with TTFT/TPOT errors per partition and
concurrency band (`python -m sim.validate.silicon`, docs/validation.md). Only the engine presets' front-end time
is fitted, per engine (`fit.py`, `python -m sim.validate.silicon.fit`).

Read first: `support.py` (what a row means to the simulator, or why it cannot be expressed), `simulate_row.py`
(one row through compose_config, load_run_config and simulate), `runner.py` (the rows in a process pool, written
as they finish). Then `metrics.py` (errors), `report.py` (tables, matrix.json), `plot.py`, `gate.py` (the CI
fidelity gate against `sim/validate/data/silicon_baseline.json`), `fit.py` (the front-end time's fit),
`held_out.py` (each row with the fit that left its model out), `targets.py` (issue 41's targets scored in one
command: `python -m sim.validate.silicon.targets`), `cli.py` (the programs' key=value arguments).
"""
