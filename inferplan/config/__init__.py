"""The configuration's records: every typed, frozen record a run is configured by, in one home that the engine
(sim/core), the programs (sim/...) and calibration (calibrate/) all import, and that imports none of them.

Read first: `run.py` (`RunConfig`, each pool's `PoolConfig` and resolved `PoolSetup` with its
`SchedulerSettings`, the `FleetSetup`), then `engine.py`, `deployment.py`, `fleet.py`, `specs.py` and
`component.py` for the parts. The loader that fills them is sim/config.py `load_run_config` (with sim/resolve.py
for the file-backed parts); `build.py` turns a yaml mapping into a record by its field types, and
`yaml_files.py` is the one reader of YAML files outside Hydra's composition.
"""
