"""fgrad.scipy.signal: convolve, correlate, convolve2d, correlate2d (direct method)."""
from fgrad._src.scipy.signal import convolve, convolve2d, correlate, correlate2d  # noqa: F401

__all__ = ["convolve", "convolve2d", "correlate", "correlate2d"]
