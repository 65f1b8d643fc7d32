"""Calibration: time every op a model needs on the device at hand, fit cost curves with their held-out error, and
write the profile the simulator loads (`python -m calibrate hardware=<h> model=<m>`; docs/calibration.md).

Read first: `run.py` (the campaign: shapes -> sweep -> fit -> profile), `shapes.py` (which ops and shapes a model
needs), `fit.py` (the cost-model form and the held-out split). Contracts shared with the simulator: `ops.py` (op
vocabulary and roofline formulas) and `profile.py` (the profile file). `crosscheck.py` compares our cost model
with kernel times measured elsewhere (Vidur's A100 tables); `gpu_session.py` is the prepared script for a borrowed
GPU.
"""
