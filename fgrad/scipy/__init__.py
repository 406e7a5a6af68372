"""fgrad.scipy: SciPy's API over fgrad."""
