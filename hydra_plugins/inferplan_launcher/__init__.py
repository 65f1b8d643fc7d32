"""inferplan's Hydra launcher `workers` (`hydra/launcher=workers`, the default of `python -m sim -m`): sweep jobs in
long-lived local worker processes. `config.py` registers it; the work is done in `sim/sweep/launch.py`."""
