"""Kernel-test fixtures: a fresh random stream per test (no seed shared between tests), its seed in failures."""
import secrets

import pytest
import torch


@pytest.fixture
def gen() -> torch.Generator:
    """A CPU generator seeded from fresh entropy; `gen.initial_seed()` reproduces a failing draw."""
    return torch.Generator().manual_seed(secrets.randbits(63))
