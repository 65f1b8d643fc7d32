"""Shared base of the inferplan packages: the input-error type and the one-line CLI error handler, and the
configuration's records (`config/`).

Read first: `errors.py`, then `config/__init__.py`. Nothing here knows about simulation, kernels or calibration; every other package may
import it, it imports none of them.
"""
