"""Shared base of the inferplan packages: the input-error type and the one-line CLI error handler.

Read first: `errors.py`. Nothing here knows about simulation, kernels or calibration; every other package may
import it, it imports none of them.
"""
