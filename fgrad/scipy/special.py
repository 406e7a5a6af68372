"""fgrad.scipy.special: SciPy's special functions, differentiable, batchable and jittable."""
from fgrad._src.scipy.special import *  # noqa: F401,F403
from fgrad._src.scipy.special import __all__  # noqa: F401
