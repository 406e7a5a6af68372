"""GPU steps for primitives that are not fused kernels.

Each entry runs a primitive on CuPy arrays with the meaning of its NumPy impl:
dot_general as one cupy.matmul (cuBLAS) after the same transposes and reshapes
the NumPy impl does; shape ops, the remaining reductions, argmax/argmin, pad,
concatenate and iota with their CuPy counterparts. Any other primitive (sort,
gather/scatter, cumulative ops, control flow, callbacks, float16 arithmetic,
...) runs its NumPy impl on host copies of its operands and its results are
copied back: a `host:` step, listed as such in `as_text`, correct but slow.
"""
import builtins
import math

from .runtime import cupy


def _exact_astype(x, dtype):
    """x as dtype through fgrad's own conversion kernel: CuPy's kernels are built
    with -ftz=true and would flush float32 subnormals on the way."""
    if x.dtype == dtype:
        return x
    from ..lax.elementwise import convert_element_type_p
    from .eager import run
    return run(convert_element_type_p, [x], {"new_dtype": dtype, "weak_type": False})


def _free(ndim, contracting, batch):
    return tuple(d for d in range(ndim) if d not in contracting and d not in batch)


def _dot_general(lhs, rhs, *, dimension_numbers, preferred_element_type):
    cp = cupy()
    (lc, rc), (lb, rb) = dimension_numbers
    if preferred_element_type is not None:
        lhs = _exact_astype(lhs, preferred_element_type)
        rhs = _exact_astype(rhs, preferred_element_type)
    ls, rs = lhs.shape, rhs.shape
    lf, rf = _free(lhs.ndim, lc, lb), _free(rhs.ndim, rc, rb)
    lhs_batch, rhs_batch = tuple(ls[d] for d in lb), tuple(rs[d] for d in rb)
    lhs_free, rhs_free = tuple(ls[d] for d in lf), tuple(rs[d] for d in rf)
    k = math.prod(ls[d] for d in lc)
    a = lhs.transpose(lb + lf + lc).reshape(lhs_batch + (math.prod(lhs_free), k))
    b = rhs.transpose(rb + rc + rf).reshape(rhs_batch + (k, math.prod(rhs_free)))
    out = cp.matmul(a, b)        # also for k == 1: CuPy's `*` would flush subnormals
    batch = tuple(q if p == 1 else p for p, q in zip(lhs_batch, rhs_batch))
    return out.reshape(batch + lhs_free + rhs_free)


def _broadcast_in_dim(x, *, shape, broadcast_dimensions):
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    return cupy().broadcast_to(x.reshape(expanded), shape)


def _squeeze(x, *, dimensions):
    dims = {d % x.ndim for d in dimensions}
    return x.reshape(tuple(n for i, n in enumerate(x.shape) if i not in dims))


def _expand_dims(x, *, dimensions):
    shape = list(x.shape)
    for d in sorted(dimensions):
        shape.insert(d, 1)
    return x.reshape(tuple(shape))


def _slice(x, *, start_indices, limit_indices, strides):
    strides = strides or (1,) * x.ndim
    return x[tuple(builtins.slice(s, lim, st)
                   for s, lim, st in zip(start_indices, limit_indices, strides))]


def _pad(x, padding_value, *, padding_config):
    cp = cupy()
    spans = [(n - 1) * (i + 1) + 1 if n else 0 for n, (_, _, i) in zip(x.shape, padding_config)]
    shape = tuple(lo + hi + s for (lo, hi, _), s in zip(padding_config, spans))
    out = cp.empty(shape, x.dtype)
    out[...] = padding_value
    # negative low/high padding is not supported here (the NumPy impl rejects it too)
    out[tuple(builtins.slice(lo, lo + s, i + 1) for (lo, _, i), s in
              zip(padding_config, spans))] = x
    return out


def _iota(*, dtype, shape, dimension):
    cp = cupy()
    expanded = [1] * len(shape)
    expanded[dimension] = shape[dimension]
    return cp.broadcast_to(cp.arange(shape[dimension], dtype=dtype).reshape(expanded), shape)


def _reduction(name):
    def run(x, *, axes):
        cp = cupy()
        if name in ("all", "any"):
            return getattr(cp, name)(x, axis=axes)
        if name in ("sum", "prod"):
            return getattr(cp, name)(x, axis=axes, dtype=x.dtype)
        return getattr(cp, name)(x, axis=axes)
    return run


def _arg(name):
    def run(x, *, axes, index_dtype):
        if x.dtype == cupy().float32:       # compared in float64: CuPy's kernels flush subnormals
            x = _exact_astype(x, cupy().dtype("float64"))
        return getattr(cupy(), name)(x, axis=axes[0]).astype(index_dtype)
    return run


def _convert(x, *, new_dtype, weak_type):
    return x.astype(new_dtype)


# primitive name -> (CuPy function, label kind)
STEPS = {
    "dot_general": (_dot_general, "cublas"),
    "reshape": (lambda x, *, new_sizes: x.reshape(new_sizes), "cupy"),
    "transpose": (lambda x, *, permutation: x.transpose(permutation), "cupy"),
    "squeeze": (_squeeze, "cupy"),
    "expand_dims": (_expand_dims, "cupy"),
    "broadcast_in_dim": (_broadcast_in_dim, "cupy"),
    "slice": (_slice, "cupy"),
    "rev": (lambda x, *, dimensions: cupy().flip(x, dimensions), "cupy"),
    "concatenate": (lambda *xs, dimension: cupy().concatenate(xs, axis=dimension), "cupy"),
    "pad": (_pad, "cupy"),
    "iota": (_iota, "cupy"),
    "reduce_sum": (_reduction("sum"), "cupy"),
    "reduce_prod": (_reduction("prod"), "cupy"),
    "reduce_max": (_reduction("max"), "cupy"),
    "reduce_min": (_reduction("min"), "cupy"),
    "reduce_and": (_reduction("all"), "cupy"),
    "reduce_or": (_reduction("any"), "cupy"),
    "argmax": (_arg("argmax"), "cupy"),
    "argmin": (_arg("argmin"), "cupy"),
    "stop_gradient": (lambda x: x, "cupy"),
}


def host_step(prim):
    """prim's NumPy impl on host copies of its operands; results copied back."""
    def run(*xs, **params):
        cp = cupy()
        out = prim.impl(*[cp.asnumpy(x) if isinstance(x, cp.ndarray) else x for x in xs],
                        **params)
        if prim.multiple_results:
            return [cp.asarray(o) for o in out]
        return cp.asarray(out)
    run.__name__ = f"host_{prim.name}"
    return run


def step_for(prim):
    """(callable on CuPy arrays, label) for a primitive with no fused kernel."""
    entry = STEPS.get(prim.name)
    if entry is not None:
        fn, kind = entry
        return fn, f"{kind}:{prim.name}"
    if prim.impl is None:
        raise NotImplementedError(f"the GPU backend cannot run {prim.name}: it has no "
                                  f"implementation")
    return host_step(prim), f"host:{prim.name}"
