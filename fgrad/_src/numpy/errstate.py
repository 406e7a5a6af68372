"""seterr, geterr, errstate, seterrcall, geterrcall: NumPy's floating-point error
settings, accepted and recorded but not acted on.

fgrad does not trap floating-point errors: 1/0, log(0), overflow and invalid
operations give inf or NaN, eagerly and under jit alike (compiled code has no
per-operation checks), whatever these settings say. They exist so NumPy code that
saves, changes and restores them runs unchanged: seterr returns the previous
settings, errstate restores them on exit, geterr reports what was set (initially
'ignore' for every category: what fgrad does). They do not change NumPy's own
settings (numpy.seterr does that). Asking for anything other than 'ignore'
warns once, pointing to fgrad.config.update("debug_nans", True), which raises at
the first operation that makes a NaN or inf from finite inputs.
"""
import contextlib
import contextvars
import warnings

_CATEGORIES = ("divide", "over", "under", "invalid")
_MODES = ("ignore", "warn", "raise", "call", "print", "log")
_settings = contextvars.ContextVar("fgrad_errstate",
                                   default=(dict.fromkeys(_CATEGORIES, "ignore"), None))
_warned = []


def geterr():
    """The recorded settings: {'divide': ..., 'over': ..., 'under': ..., 'invalid': ...}."""
    return dict(_settings.get()[0])


def seterr(all=None, divide=None, over=None, under=None, invalid=None):
    """Record new settings (NumPy's arguments) and return the previous ones. fgrad
    computations do not trap floating-point errors, whatever is set."""
    settings, call = _settings.get()
    new = dict(settings)
    for name, mode in (("divide", divide), ("over", over), ("under", under),
                       ("invalid", invalid)):
        mode = mode if mode is not None else all
        if mode is None:
            continue
        if mode not in _MODES:
            raise ValueError(f"seterr: {name}={mode!r} is not one of {', '.join(_MODES)}")
        new[name] = mode
    if any(m != "ignore" for m in new.values()) and not _warned:
        _warned.append(True)
        warnings.warn("fgrad does not trap floating-point errors (results become inf or "
                      "NaN); seterr/errstate settings are recorded only. To find where a "
                      "NaN appears, use fgrad.config.update('debug_nans', True)",
                      RuntimeWarning, stacklevel=2)
    _settings.set((new, call))
    return dict(settings)


def geterrcall():
    """The callable recorded by seterrcall (None at first)."""
    return _settings.get()[1]


def seterrcall(func):
    """Record `func` as the error callback and return the previous one (never called:
    fgrad does not trap floating-point errors)."""
    if func is not None and not callable(func) and not hasattr(func, "write"):
        raise ValueError("seterrcall: func must be callable, an object with a write "
                         "method, or None")
    settings, old = _settings.get()
    _settings.set((settings, func))
    return old


@contextlib.contextmanager
def _errstate(call, kwargs):
    saved = _settings.get()
    try:
        if call is not None:
            seterrcall(call)
        seterr(**kwargs)
        yield
    finally:
        _settings.set(saved)


class errstate(contextlib.ContextDecorator):
    """with errstate(divide='ignore', ...): the settings apply inside the block and
    the previous ones come back after it (also usable as a decorator)."""

    def __init__(self, *, call=None, all=None, divide=None, over=None, under=None,
                 invalid=None):
        self._call = call
        self._kwargs = dict(all=all, divide=divide, over=over, under=under, invalid=invalid)
        self._active = []

    def __enter__(self):
        manager = _errstate(self._call, self._kwargs)
        manager.__enter__()
        self._active.append(manager)
        return self

    def __exit__(self, *exc):
        return self._active.pop().__exit__(*exc)
