"""Session-wide test settings: type-check every jaxpr fgrad builds, and keep
compiled code in a temporary cache.

With `check_jaxprs` on, every jaxpr built by make_jaxpr/linearize (and so by
grad/vjp) is run through the type checker, and every cotangent written in a
backward pass must match its variable's shape. FGRAD_CACHE_DIR points at a
fresh directory, so tests compile from scratch and leave the user's cache alone.
"""
import os
import shutil
import tempfile

import numpy as np
import pytest

import fgrad

_CACHE_DIR = tempfile.mkdtemp(prefix="fgrad-test-cache-")


def pytest_configure(config):
    os.environ.setdefault("FGRAD_CACHE_DIR", _CACHE_DIR)
    fgrad.config.update("check_jaxprs", True)


def pytest_unconfigure(config):
    shutil.rmtree(_CACHE_DIR, ignore_errors=True)


@pytest.fixture(autouse=True)
def _check_jaxprs_on():
    """Keep the switch on even if a test changed it."""
    fgrad.config.update("check_jaxprs", True)
    yield
    fgrad.config.update("check_jaxprs", True)


@pytest.fixture
def rng():
    return np.random.default_rng(0)
