"""fgrad.scipy: SciPy's functions written with fgrad (import the submodules)."""
