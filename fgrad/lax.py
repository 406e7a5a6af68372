"""fgrad.lax: low-level operations, one per primitive (no dtype promotion)."""
from fgrad._src.lax import *  # noqa: F401,F403
from fgrad._src.lax import linalg  # noqa: F401,E402  (fgrad.lax.linalg, as jax.lax.linalg)
