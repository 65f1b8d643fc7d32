"""Measured grid profiles from NVIDIA AIConfigurator's performance database (`python -m calibrate.import_aic`).

Read first: `grid_model.py` (`GridModel.latency_s(op, **shape)`: the interface a pricer calls, with the ops,
arguments and units), `grid.py` (the form: log-efficiency interpolated over each family's measured shape grid) and
`convert.py` (database rows -> our names and units, with provenance). The simulator reads a grid through
`lookup.py` (`GridLookup`: the same prices sliced along the arguments a pricer varies, microseconds a shape). Beside
them: `db.py` (the database's folders, versions and reuse), `names.py` (name maps), `crossval.py` (held-out error),
`report.py` (the simulator's analytical pricing of the same rows is added from the simulator's side:
`sim/validate/op_analytical.py`, `python -m sim.validate.op_accuracy`). docs/cost-model.md, section
"Measured grids from AIConfigurator", has the error table and what each family covers.
"""
