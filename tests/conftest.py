"""Test-wide setup: Triton runs in its CPU interpreter (must be set before triton is imported)."""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")
