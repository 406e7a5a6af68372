"""The default float dtype: what creation functions (zeros, ones, eye, arange and
array of Python floats, linspace, random draws) and Python floats become when no
dtype says otherwise.

float32 unless changed, in three ways, innermost first:
- `with fgrad.default_float("float64"): ...`: for the code in the block (a context
  variable: other threads and asyncio tasks keep their own setting);
- `fgrad.config.update("default_float", "float64")`: for the whole process;
- the environment variable FGRAD_DEFAULT_FLOAT=float64, read at import.
A dtype the user passes is never changed (float32 arrays stay float32 under a
float64 default); only the choices that defaults make are.
"""
import contextlib
import contextvars

from .config import as_default_float, config

_scoped = contextvars.ContextVar("fgrad_default_float")
# scoped_or(config.default_float) is the default float now: one C call, for jit's
# per-call check (default_float_dtype() says the same, more readably).
scoped_or = _scoped.get
_first_change_hooks = []


def on_first_change(fn):
    """Call fn() once, when a `default_float` block opens or config.default_float is
    set for the first time (until then the default cannot differ from the one at
    import, and jit's fastest path skips checking it)."""
    _first_change_hooks.append(fn)


def _changing():
    while _first_change_hooks:
        _first_change_hooks.pop()()


config.on_update("default_float", lambda value: _changing())


def default_float_dtype():
    """The default float dtype now: the innermost `default_float` block's, else
    config.default_float."""
    return _scoped.get(config.default_float)


@contextlib.contextmanager
def default_float(dtype):
    """Within the block, creation functions and Python floats default to `dtype`
    ('float32' or 'float64'); blocks nest, and the setting is restored on exit."""
    token = _scoped.set(as_default_float(dtype, "fgrad.default_float"))
    _changing()
    try:
        yield
    finally:
        _scoped.reset(token)
