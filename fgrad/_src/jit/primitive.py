"""The `jit` primitive: a call of a closed jaxpr that is compiled when it runs.

Its rules transform the inner jaxpr and call `jit` again on the result, so jit
composes with every transform in both directions:
- jvp: the inner program is linearized once (per pattern of nonzero tangents)
  into a primal program that also returns residuals and a linear program from
  residuals and tangents to output tangents; under `linearize` only the linear
  call is recorded, so reverse mode transposes a single equation;
- transpose: the linear program transposed (known inputs run forwards first);
- batch: the inner program vectorized.
Derived programs are cached on the jaxpr they came from.
"""
import time

from .. import core
from ..config import config
from ..ad import is_undefined, linearize_flat, transposed_program
from ..batching import axis_size_of, batch_flat
from ..core import Primitive
from ..jaxpr import ClosedJaxpr, Jaxpr, eval_jaxpr
from ..lru import derived
from ..partial_eval import trace_to_subjaxpr
from ..compiler.simplify import simplify
from .executable import Executable, prefetch
from .log import log_compile

jit_p = Primitive("jit", multiple_results=True)
jit_p.abstract_eval = lambda *avals, jaxpr, name: jaxpr.out_avals
jit_p.out_weak_types = lambda params: [a.weak_type for a in params["jaxpr"].out_avals]


def _memo(jaxpr, key, make):
    return derived(jaxpr, ("jit",) + key, make)


def detached(program, closed):
    """`program` (closed, simplified), never `closed` itself: what is derived from
    a jaxpr must not hold it, so that it is freed as soon as its owner drops it
    (not at the next garbage collection)."""
    return ClosedJaxpr(program.jaxpr, program.consts) if program is closed else program


# ----------------------------------------------------------------------------
# Compiling and running

def compile_jaxpr(closed, name, donated=()):
    """The Executable for a closed jaxpr (compiled once per jaxpr object and set of
    donated input positions)."""
    def make():
        start = time.perf_counter()
        prefetch(closed)        # (compiles while the program is simplified and planned)
        program = detached(simplify(closed), closed)
        exe = Executable(program, name, donated)
        log_compile(name, closed, exe, time.perf_counter() - start)
        return exe
    return _memo(closed, ("executable", tuple(sorted(donated)), config.flush_denormals), make)


def _jit_impl(*args, jaxpr, name):
    return compile_jaxpr(jaxpr, name)(*args)


jit_p.impl = _jit_impl


# ----------------------------------------------------------------------------
# Forward mode and linearization

def _split_jvp(closed, tangent_weak):
    """(primal program -> outputs + residuals, linear program (residuals, tangents)
    -> tangent outputs, number of residuals, which outputs have tangents).
    tangent_weak: per input, None (zero tangent) or the tangent's weak type."""
    box = {}
    nonzero = [w is not None for w in tangent_weak]
    t_avals = [core.ShapedArray(a.shape, a.dtype, bool(w)) for a, w in
               zip(closed.in_avals, tangent_weak)]

    def primal_and_residuals(*primals):
        outs, lin = linearize_flat(lambda *xs: eval_jaxpr(closed.jaxpr, closed.consts, *xs),
                                   list(primals), "jit", in_mask=nonzero,
                                   tangent_avals=t_avals)
        box["lin"] = lin
        return list(outs) + list(lin.consts)

    avals = closed.in_avals
    known = trace_to_subjaxpr(primal_and_residuals, avals, core.eval_trace, "jit (primal)")
    lin = box["lin"]
    linear = ClosedJaxpr(Jaxpr([], lin.jaxpr.constvars + lin.jaxpr.invars, lin.jaxpr.eqns,
                               lin.jaxpr.outvars), [])
    return known, linear, len(lin.consts), tuple(lin.out_mask)


def _jit_jvp(primals, tangents, *, jaxpr, name):
    weak = tuple(None if t is None else core.is_weak(t) for t in tangents)
    known, linear, n_res, out_mask = _memo(jaxpr, ("jvp", weak),
                                           lambda: _split_jvp(jaxpr, weak))
    both = jit_p.bind(*primals, jaxpr=known, name=name)
    n_out = len(both) - n_res
    outs, residuals = both[:n_out], both[n_out:]
    touts = iter(jit_p.bind(*residuals, *[t for t in tangents if t is not None],
                            jaxpr=linear, name=f"{name}_jvp"))
    return outs, [next(touts) if m else None for m in out_mask]


jit_p.jvp = _jit_jvp


# ----------------------------------------------------------------------------
# Transposition

def _transposed(closed, linear_mask, ct_weak):
    """The transposed program (see ad.transposed_program); ct_weak: per output, None
    (zero cotangent) or the cotangent's weak type."""
    ct_avals = [None if w is None else core.ShapedArray(a.shape, a.dtype, w)
                for a, w in zip(closed.out_avals, ct_weak)]
    return transposed_program(closed, linear_mask, ct_avals, "jit (transpose)")


def _jit_transpose(cts, *args, jaxpr, name):
    linear_mask = tuple(is_undefined(a) for a in args)
    ct_weak = tuple(None if c is None else core.is_weak(c) for c in cts)
    program = _memo(jaxpr, ("transpose", linear_mask, ct_weak),
                    lambda: _transposed(jaxpr, linear_mask, ct_weak))
    known = [a for a in args if not is_undefined(a)]
    outs = iter(jit_p.bind(*known, *[c for c in cts if c is not None], jaxpr=program,
                           name=f"{name}_transpose"))
    return [next(outs) if m else None for m in linear_mask]


jit_p.transpose = _jit_transpose


# ----------------------------------------------------------------------------
# Vectorization

def _batched(closed, dims, size):
    fun = batch_flat(lambda *xs: eval_jaxpr(closed.jaxpr, closed.consts, *xs), dims, size)
    avals = [core.ShapedArray(a.shape[:d] + (size,) + a.shape[d:], a.dtype, a.weak_type)
             if d is not None else a for a, d in zip(closed.in_avals, dims)]
    return trace_to_subjaxpr(fun, avals, core.eval_trace, "jit (vmap)")


def _jit_batch(vals, dims, *, jaxpr, name):
    size = axis_size_of(vals, dims)
    key = ("batch", tuple(dims), size)
    program = _memo(jaxpr, key, lambda: _batched(jaxpr, list(dims), size))
    outs = jit_p.bind(*vals, jaxpr=program, name=name)
    return outs, [0] * len(outs)


jit_p.batch = _jit_batch
