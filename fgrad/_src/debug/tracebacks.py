"""Tracebacks that end in the user's code.

An exception that escapes a public transform (grad, jit, vmap, ...) is re-raised
with fgrad's own frames (files inside the fgrad package) removed from its
traceback, so the innermost frames shown are the user's lines. The wrapper's
own frame stays at the top (pytest hides it). Set FGRAD_TRACEBACK_FILTERING=off
(or config.update("traceback_filtering", False)) to keep every frame.
"""
import functools
import types

from ..config import config
from ..errors import _SKIP_DIRS

_NOTE = ("(fgrad's internal frames were removed from this traceback; set "
         "FGRAD_TRACEBACK_FILTERING=off to see them)")


def _is_internal(frame):
    return frame.f_code.co_filename.startswith(_SKIP_DIRS)


def filtered_traceback(tb):
    """The traceback `tb` without fgrad's frames (None if nothing is left)."""
    kept = []
    while tb is not None:
        if not _is_internal(tb.tb_frame):
            kept.append(tb)
        tb = tb.tb_next
    new = None
    for entry in reversed(kept):
        new = types.TracebackType(new, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return new


def api_boundary(fun):
    """Wrap a public entry point: exceptions leave it with filtered tracebacks."""
    @functools.wraps(fun)
    def boundary(*args, **kwargs):
        __tracebackhide__ = True  # noqa: F841 -- pytest: do not show this frame
        try:
            return fun(*args, **kwargs)
        except Exception as e:
            if not config.traceback_filtering:
                raise
            raise with_filtered_traceback(e)
    return boundary


def with_filtered_traceback(e):
    """`e` with its traceback filtered, and a note saying so (added once)."""
    e = e.with_traceback(filtered_traceback(e.__traceback__))
    notes = getattr(e, "__notes__", ())
    if _NOTE not in notes:
        e.add_note(_NOTE)
    return e
