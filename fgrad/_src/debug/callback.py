"""`debug_callback`: call back into Python from traced and compiled programs.

The primitive has no outputs and is *effectful*: tracing records it even when
its operands are constants, and simplification never folds, merges or drops
it, so a jitted program calls back at that step, in program order. Its rules:

- eager: the callback runs at once on the values;
- jit: the equation stays in the program (a `numpy:debug_callback` step of the
  compiled plan) and calls back each time the program runs;
- jvp/grad: the callback runs on the primal values only; tangent and cotangent
  programs contain no callback (it has no outputs, so nothing flows back);
- vmap: the callback runs once per batch member, in order, each time seeing
  that member's slice (values vmap does not map are passed whole).
"""
import numpy as np

from .. import tree_util
from ..ad import defjvp
from ..batching import axis_size_of
from ..core import Array, Primitive, Tracer

debug_callback_p = Primitive("debug_callback", multiple_results=True)
debug_callback_p.effectful = True


def _impl(*values, callback):
    callback(*values)
    return []


def _abstract_eval(*avals, callback):
    return []


def _batch(values, dims, *, callback):
    size = axis_size_of(values, dims)

    def per_member(*xs):
        for i in range(size):
            callback(*[x if d is None else np.take(x, i, axis=d) for x, d in zip(xs, dims)])

    per_member.__name__ = getattr(callback, "__name__", "callback")
    debug_callback_p.bind(*values, callback=per_member)
    return [], []


debug_callback_p.impl = _impl
debug_callback_p.abstract_eval = _abstract_eval
debug_callback_p.batch = _batch
defjvp(debug_callback_p)  # no tangent rules: the primal call runs, tangents do nothing


def _array_leaf(x):
    return isinstance(x, (Array, Tracer, np.ndarray, np.generic))


def callback(fn, *args, ordered=True, **kwargs):
    """Call fn(*args, **kwargs) with the concrete values of the arrays in args and
    kwargs (pytrees), also inside jit, vmap and grad; returns None. Arrays arrive
    as fgrad Arrays; other leaves (Python numbers, strings) are passed unchanged.

    Callbacks always run in program order (`ordered` is accepted for JAX
    compatibility). Under vmap fn runs once per batch member; under grad it runs
    in the forward pass with primal values.
    """
    leaves, tree = tree_util.flatten((args, kwargs))
    is_array = [_array_leaf(x) for x in leaves]
    arrays = [x for x, a in zip(leaves, is_array) if a]
    others = [x for x, a in zip(leaves, is_array) if not a]

    def call(*values):
        vals, rest = iter(values), iter(others)
        full = [Array(np.asarray(next(vals))) if a else next(rest) for a in is_array]
        a, k = tree_util.unflatten(tree, full)
        fn(*a, **k)

    call.__name__ = getattr(fn, "__name__", type(fn).__name__)
    debug_callback_p.bind(*arrays, callback=call)
