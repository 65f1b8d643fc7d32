"""The trust loop: replay a measured serving benchmark through the simulator, report the error, fit what a
kernel profile cannot see (`python -m sim.validate`, docs/validation.md).

Read first: `pipeline.py` (the loop end to end), `formats/` (the readers, one per client, into `measured.py`'s
`MeasuredRun`), `replay.py` (same send times and lengths through the configured deployment). Then
`compare.py` (errors), `fit.py` (residual parameters on a training split), `overlay.py` (the fitted values as a
Hydra overlay), `published.py` (the published A100 results, replayed as documented, never fitted).
"""
