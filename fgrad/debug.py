"""Debugging that works inside transforms.

- `print(fmt, *args, **kwargs)`: str.format-style printing of array values, eagerly
  and inside jit, vmap (once per batch member) and grad (forward pass only).
- `callback(fn, *args, **kwargs)`: call Python with concrete values, same rules.
- `tap_grad(x, fn)`: x unchanged; fn(cotangent) is called in the backward pass.
- NaN/Inf origin finder: `fgrad.config.update("debug_nans", True)` (or
  FGRAD_DEBUG_NANS=1) raises `DebugNansError` at the first primitive that makes a
  NaN or Inf from finite inputs, naming the user's source line.
- Tracebacks through transforms hide fgrad's frames (FGRAD_TRACEBACK_FILTERING=off
  keeps them); `fgrad.make_jaxpr(f, print_locations=True)` shows each equation's
  source line.
"""
from fgrad._src.debug.callback import callback  # noqa: F401
from fgrad._src.debug.nans import DebugNansError  # noqa: F401
from fgrad._src.debug.printing import debug_print as print  # noqa: F401,A001
from fgrad._src.debug.taps import tap_grad  # noqa: F401

__all__ = ["print", "callback", "tap_grad", "DebugNansError"]
