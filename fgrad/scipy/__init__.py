"""fgrad.scipy: SciPy's API over fgrad's primitives (import fgrad.scipy.special, ...)."""
