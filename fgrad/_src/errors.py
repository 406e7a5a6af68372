"""Error types and the user-source-line finder used in every message."""
import os
import sys

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SKIP_DIRS = (_PKG_DIR + os.sep,)


_INTERNAL = {}  # code object -> whether it belongs to fgrad (or Python's frozen modules)


def user_frame(skip=0):
    """The innermost stack frame that is not fgrad's own code (None if none).
    `skip`: how many callers to pass over unexamined (known to be fgrad's; this
    saves creating their frame objects, the main cost of the walk)."""
    try:
        f = sys._getframe(1 + skip)
    except ValueError:     # fewer frames than `skip`: none is the user's
        return None
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


class SourceInfo:
    """Where an operation came from: the user's file, line and function; `backward`
    marks work done by a derivative rule in the backward pass of that operation."""
    __slots__ = ("file", "line", "function", "backward")

    def __init__(self, file, line, function, backward=False):
        self.file, self.line, self.function, self.backward = file, line, function, backward

    def in_backward_pass(self):
        if self.backward:
            return self
        return SourceInfo(self.file, self.line, self.function, True)

    def short(self):
        """'test_x.py:12 (f)', the form the jaxpr printer writes."""
        where = f"{self.function}, backward pass" if self.backward else self.function
        return f"{os.path.basename(self.file)}:{self.line} ({where})"

    def code(self):
        """The text of the source line ('' when the file cannot be read)."""
        import linecache
        return linecache.getline(self.file, self.line).strip()

    def __str__(self):
        return f"{self.file}:{self.line} (in {self.function})"

    __repr__ = __str__


class _Provenance:
    """The source info that operations created right now inherit, when fgrad is
    replaying or transposing a recorded equation (None: the user's own frame)."""
    __slots__ = ("info",)


provenance = _Provenance()
provenance.info = None


def source_info(skip=0):
    """The SourceInfo for an operation being created now, or None; `skip` as for
    user_frame, counted from source_info's caller."""
    info = provenance.info
    if info is not None:
        return info
    f = user_frame(skip + 1)
    if f is None:
        return None
    code = f.f_code
    return SourceInfo(code.co_filename, f.f_lineno, code.co_name)


def user_location():
    """'file.py:12 (in loss)' for the user's line that led here, or ''."""
    info = source_info()
    return "" if info is None else str(info)


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


class ArrayTooLargeError(FgradTypeError, ValueError):
    """An operation would make an array of more bytes than an index can address."""


class ConcretizationError(TypeError):
    """A traced value was used where a concrete Python value is needed."""


class EscapedTracerError(RuntimeError):
    """A tracer was used after the transform that made it had finished."""
