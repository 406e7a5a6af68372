"""fgrad.scipy.optimize: minimize (BFGS, L-BFGS-B), jittable and vmappable."""
from fgrad._src.scipy.minimize import Bounds, OptimizeResults, minimize  # noqa: F401

__all__ = ["Bounds", "OptimizeResults", "minimize"]
