"""Error types and the user-source-line finder used in every message."""
import os
import sys

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SKIP_DIRS = (_PKG_DIR + os.sep,)


_INTERNAL = {}  # code object -> whether it belongs to fgrad (or Python's frozen modules)


def user_frame():
    """The innermost stack frame that is not fgrad's own code (None if none)."""
    f = sys._getframe(1)
    while f is not None:
        code = f.f_code
        internal = _INTERNAL.get(code)
        if internal is None:
            name = code.co_filename
            internal = _INTERNAL[code] = name.startswith(_SKIP_DIRS) or name.startswith("<frozen")
        if not internal:
            return f
        f = f.f_back
    return None


def user_location():
    """'file.py:12 (in loss)' for the user's line that led here, or ''."""
    f = user_frame()
    if f is None:
        return ""
    return f"{f.f_code.co_filename}:{f.f_lineno} (in {f.f_code.co_name})"


class FgradTypeError(TypeError):
    """A shape or dtype error found while checking an operation's inputs."""

    def __init__(self, message, hint=None, location=None):
        loc = user_location() if location is None else location
        text = message
        if loc:
            text += f"\n  at {loc}"
        if hint:
            text += f"\n  hint: {hint}"
        super().__init__(text)


class ConcretizationError(TypeError):
    """A traced value was used where a concrete Python value is needed."""


class EscapedTracerError(RuntimeError):
    """A tracer was used after the transform that made it had finished."""
