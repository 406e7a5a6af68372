"""Session-wide test settings: type-check every jaxpr fgrad builds.

With `check_jaxprs` on, every jaxpr built by make_jaxpr/linearize (and so by
grad/vjp) is run through the type checker, and every cotangent written in a
backward pass must match its variable's shape.
"""
import numpy as np
import pytest

import fgrad


def pytest_configure(config):
    fgrad.config.update("check_jaxprs", True)


@pytest.fixture(autouse=True)
def _check_jaxprs_on():
    """Keep the switch on even if a test changed it."""
    fgrad.config.update("check_jaxprs", True)
    yield
    fgrad.config.update("check_jaxprs", True)


@pytest.fixture
def rng():
    return np.random.default_rng(0)
