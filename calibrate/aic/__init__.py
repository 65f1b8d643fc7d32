"""Measured grid profiles from NVIDIA AIConfigurator's performance database (`python -m calibrate.import_aic`).

Read first: `grid_model.py` (`GridModel.latency_s(op, **shape)`: the interface a pricer calls, with the ops,
arguments and units), `grid.py` (the form: log-efficiency interpolated over each family's measured shape grid) and
`convert.py` (database rows -> our names and units, with provenance). Beside them: `db.py` (the database's
folders, versions and reuse), `names.py` (name maps), `crossval.py` (held-out error), `analytical.py` (the
simulator's analytical pricing of the same rows, for the report) and `report.py`. docs/cost-model.md, section
"Measured grids from AIConfigurator", has the error table and what each family covers.
"""
