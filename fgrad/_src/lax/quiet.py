"""`quiet(fn)`: a NumPy impl that ignores floating-point warnings (log(0), 1/0,
overflow) for the duration of one call, at the eager path's cost.

`with np.errstate(all="ignore")` costs about three times an element-wise op on a
small array; NumPy 2 keeps its error state in a context variable, so this sets a
prepared "ignore everything" state and resets it (the prepared state is rebuilt
whenever the caller's state differs from the one it was made from, so the
caller's buffer size and error callback carry over exactly as errstate's would).
Without those NumPy internals it falls back to np.errstate.
"""
import functools

import numpy as np

try:
    from numpy._core.umath import _extobj_contextvar, _make_extobj
except ImportError:  # NumPy 1.x, or internals renamed
    _extobj_contextvar = _make_extobj = None

_prepared = (None, None)   # (the caller's state it was made from, the ignoring state)


def _prepare(current):
    """The ignoring state made from the caller's state `current` (remembered)."""
    global _prepared
    state = _make_extobj(all="ignore")
    _prepared = (current, state)
    return state


def quiet(fn, keywords=False):
    """fn with NumPy's floating-point warnings ignored while it runs. keywords: fn
    takes parameters by keyword (without them the call is cheaper)."""
    if _extobj_contextvar is None:
        @functools.wraps(fn)
        def impl(*args, **params):
            with np.errstate(all="ignore"):
                return fn(*args, **params)
        return impl

    get, set_, reset = _extobj_contextvar.get, _extobj_contextvar.set, _extobj_contextvar.reset

    if keywords:
        @functools.wraps(fn)
        def impl(*args, **params):
            current = get()
            made_from, state = _prepared
            token = set_(state if made_from is current else _prepare(current))
            try:
                return fn(*args, **params)
            finally:
                reset(token)
        return impl

    @functools.wraps(fn)
    def positional(*args):
        current = get()
        made_from, state = _prepared
        token = set_(state if made_from is current else _prepare(current))
        try:
            return fn(*args)
        finally:
            reset(token)
    positional.quiet_inner = fn     # for hot callers that set the state inline (core.lean_unary)
    return positional
