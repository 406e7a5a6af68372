"""`debug.print`: str.format-style printing of array values from inside transforms."""
import sys

from .callback import callback


def debug_print(fmt, *args, **kwargs):
    """Print fmt.format(*args, **kwargs) with the arrays' concrete values, also
    inside jit (each time the compiled program runs), vmap (once per batch
    member) and grad (forward pass only, primal values); in program order."""
    def _print(*a, **k):
        sys.stdout.write(fmt.format(*a, **k) + "\n")

    _print.__name__ = f"print({fmt!r})"
    callback(_print, *args, **kwargs)
