"""fgrad.lax: low-level operations, one per primitive (no dtype promotion)."""
from fgrad._src.lax import *  # noqa: F401,F403
