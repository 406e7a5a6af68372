"""Debugging tools behind `fgrad.debug`: callbacks and printing that survive every
transform, gradient taps, the NaN/Inf origin finder and traceback filtering."""
