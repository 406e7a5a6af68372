"""fgrad.numpy.fft: NumPy's discrete Fourier transforms (import fgrad.numpy as fnp;
fnp.fft.rfft(x)), differentiable, batched by vmap and compiled by jit.

NumPy's names, `n`/`s`, `axis`/`axes` and `norm`, with JAX's dtypes: float32
input gives complex64, float64 gives complex128.
"""
from fgrad._src.numpy.fft import (fft, fft2, fftfreq, fftn, fftshift, hfft, ifft,  # noqa: F401
                                  ifft2, ifftn, ifftshift, ihfft, irfft, irfft2, irfftn,
                                  rfft, rfft2, rfftfreq, rfftn)

__all__ = ["fft", "fft2", "fftfreq", "fftn", "fftshift", "hfft", "ifft", "ifft2", "ifftn",
           "ifftshift", "ihfft", "irfft", "irfft2", "irfftn", "rfft", "rfft2", "rfftfreq",
           "rfftn"]
