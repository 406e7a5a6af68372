"""scipy.signal's direct convolutions: convolve, correlate (N-d), convolve2d and
correlate2d (2-d, with boundary handling), modes 'full', 'same' and 'valid'.

Every result is computed directly: the larger operand is padded and the result
is the sum, over the smaller operand's (the kernel's) taps, of the tap times the
window of the padded operand it meets: work prod(output shape) * (kernel size),
memory of a few outputs. Kernels of up to 128 taps are unrolled into one
program of slices, products and sums (which jit fuses into one loop); larger
ones run as a fori_loop over the taps with dynamic slices. method='fft' and
'auto' compute the same values this way. Everything is
built from slices, pads and a dot, so both inputs differentiate to any order,
batch under vmap and compile under jit.
"""
import numpy as np

from ..core import Array, Tracer
from ..errors import FgradTypeError
from .. import lax
from ..numpy import complex_math as _complex_math
from ..numpy import creation as _creation
from ..numpy import indexing as _indexing
from ..numpy import shape as _shape
from ..numpy.util import asarray, promote, shape_str

_MODES = ("full", "same", "valid")
_UNROLL_TAPS = 128
_METHODS = ("auto", "direct", "fft")
_BOUNDARIES = {"fill": "constant", "pad": "constant", "wrap": "wrap", "circular": "wrap",
               "symm": "symmetric", "symmetric": "symmetric"}


def _value(x):
    return x if isinstance(x, (Array, Tracer)) else asarray(x)


def _check_mode(name, mode):
    if mode not in _MODES:
        raise ValueError(f"{name}: mode must be one of {_MODES}, got {mode!r}")


def _window(full_lengths, n1, mode, round_up=False):
    """(start, length) per axis of the 'full' or 'same' part of the full result, in
    full-result coordinates; n1 is in1's shape (the 'same' reference). An odd
    surplus is split with the extra element before ('round_up', as SciPy's
    correlate2d does) or after the window."""
    if mode == "full":
        return [(0, full) for full in full_lengths]
    return [((full - ref + round_up) // 2, ref) for full, ref in zip(full_lengths, n1)]


def _convolve_direct(x, w, windows, pad_mode="constant", fill=0):
    """The convolution x * w restricted to `windows` ((start, length) per axis, in
    full-result coordinates); x is padded with `pad_mode` (the boundary)."""
    widths = [(m - 1, m - 1) for m in w.shape]
    if pad_mode == "constant":
        xp = _shape.pad(x, widths, mode="constant", constant_values=fill)
    else:
        xp = _shape.pad(x, widths, mode=pad_mode)
    # full[k] = sum_r xp[k + r] * flip(w)[r]: one shifted window of xp per tap r.
    kernel = _shape.flip(w)
    starts = [start for start, _ in windows]
    lengths = [length for _, length in windows]
    if w.size <= _UNROLL_TAPS:
        total = None
        for tap in np.ndindex(*w.shape):
            window = xp[tuple(slice(s + r, s + r + n) for s, r, n in zip(starts, tap, lengths))]
            term = kernel[tap] * window
            total = term if total is None else total + term
        return total

    flat_kernel = kernel.reshape(-1)

    def add_tap(i, total):
        tap = _indexing.unravel_index(i, w.shape)
        window = lax.dynamic_slice(xp, [s + r for s, r in zip(starts, tap)], lengths)
        return total + lax.dynamic_slice(flat_kernel, [i], [1])[0] * window

    return lax.fori_loop(0, w.size, add_tap, _creation.zeros(lengths, xp.dtype))


def _operands(name, in1, in2):
    a, b = _value(in1), _value(in2)
    if a.ndim != b.ndim:
        raise FgradTypeError(f"{name}: in1 and in2 must have the same number of dimensions, "
                             f"got shapes {shape_str(a)} and {shape_str(b)}",
                             hint="add axes of length 1 (fnp.expand_dims) to the smaller one")
    return promote(a, b)


def _contains(a, b):
    return all(p >= q for p, q in zip(a.shape, b.shape))


def _valid_order(name, a, b):
    """The operands ordered (larger, smaller) for mode 'valid', or an error."""
    if _contains(a, b):
        return a, b
    if _contains(b, a):
        return b, a
    raise ValueError(f"{name}: in mode 'valid' one input must be at least as large as the "
                     f"other in every dimension, got shapes {a.shape} and {b.shape}")


def _empty(a):
    """SciPy's result when an input is empty: an empty 1-D array."""
    return _value(np.zeros((0,), np.dtype(a.dtype)))


def _convolve_nd(name, in1, in2, mode, method, flip_in2):
    _check_mode(name, mode)
    if method not in _METHODS:
        raise ValueError(f"{name}: method must be one of {_METHODS}, got {method!r}")
    a, b = _operands(name, in1, in2)
    if flip_in2:
        b = _complex_math.conj(b)
        b = _shape.flip(b) if b.ndim else b
    if a.ndim == 0:
        return a * b
    if a.size == 0 or b.size == 0:
        return _empty(a)
    if mode == "valid":
        x, w = _valid_order(name, a, b)
        windows = [(m - 1, n - m + 1) for n, m in zip(x.shape, w.shape)]
        return _convolve_direct(x, w, windows)
    x, w = (a, b) if a.size >= b.size else (b, a)
    full = [n + m - 1 for n, m in zip(a.shape, b.shape)]
    return _convolve_direct(x, w, _window(full, a.shape, mode))


def convolve(in1, in2, mode="full", method="auto"):
    """N-dimensional convolution of in1 and in2 (same number of dimensions), as
    scipy.signal.convolve: 'full' (every overlap), 'same' (in1's shape, centred on
    'full') or 'valid' (only full overlaps; one input must contain the other).
    Every method computes directly (see the module docstring)."""
    return _convolve_nd("convolve", in1, in2, mode, method, False)


def correlate(in1, in2, mode="full", method="auto"):
    """N-dimensional cross-correlation, as scipy.signal.correlate:
    z[k] = sum_l in1[l + k - K] * conj(in2[l]) (K centring the 'full' result),
    the convolution of in1 with in2 conjugated and reversed along every axis."""
    return _convolve_nd("correlate", in1, in2, mode, method, True)


def _check_2d(name, a, b):
    if a.ndim != 2 or b.ndim != 2:
        raise FgradTypeError(f"{name}: inputs must be 2-D, got shapes {shape_str(a)} and "
                             f"{shape_str(b)}", hint="use convolve/correlate for N-d inputs")


def _boundary(name, boundary, fillvalue):
    if boundary not in _BOUNDARIES:
        raise ValueError(f"{name}: boundary must be one of 'fill', 'wrap' or 'symm', "
                         f"got {boundary!r}")
    if np.ndim(fillvalue) != 0:
        raise ValueError(f"{name}: fillvalue must be a scalar, got shape {np.shape(fillvalue)}")
    return _BOUNDARIES[boundary]


def _convolve2d(name, in1, in2, mode, boundary, fillvalue, flip_in2):
    _check_mode(name, mode)
    pad_mode = _boundary(name, boundary, fillvalue)
    a, b = _operands(name, in1, in2)
    _check_2d(name, a, b)
    if a.size == 0 or b.size == 0:
        return _empty(a)
    if flip_in2:
        b = _shape.flip(_complex_math.conj(b))
    if mode == "valid":
        x, w = _valid_order(name, a, b)
        windows = [(m - 1, n - m + 1) for n, m in zip(x.shape, w.shape)]
        return _convolve_direct(x, w, windows)
    full = [n + m - 1 for n, m in zip(a.shape, b.shape)]
    windows = _window(full, a.shape, mode, round_up=flip_in2)
    return _convolve_direct(a, b, windows, pad_mode, fillvalue)


def convolve2d(in1, in2, mode="full", boundary="fill", fillvalue=0):
    """2-D convolution, as scipy.signal.convolve2d. `boundary` says how in1 extends
    past its edges in modes 'full' and 'same': 'fill' (with `fillvalue`), 'wrap'
    (periodic) or 'symm' (mirrored, the edge repeated)."""
    return _convolve2d("convolve2d", in1, in2, mode, boundary, fillvalue, False)


def correlate2d(in1, in2, mode="full", boundary="fill", fillvalue=0):
    """2-D cross-correlation, as scipy.signal.correlate2d: the 2-D convolution of
    in1 with in2 conjugated and reversed along both axes. Its 'same' window sits half an element
    earlier than convolve2d's when the surplus is odd, as SciPy's does."""
    return _convolve2d("correlate2d", in1, in2, mode, boundary, fillvalue, True)
