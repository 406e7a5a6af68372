"""fgrad.numpy: NumPy's API over fgrad's primitives (import fgrad.numpy as fnp)."""
from fgrad._src.numpy.util import asarray  # noqa: F401
from fgrad._src.numpy.ufuncs import *  # noqa: F401,F403
