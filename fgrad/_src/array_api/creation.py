"""The standard's creation functions: fgrad.numpy's, with the standard's signatures,
a `device=` argument, and dtypes fixed by the standard (a Python float fill value
makes a default-float array, strongly typed)."""
import numpy as np

from .. import dtypes, lax
from ..core import ArrayMethods
from ..numpy import creation as _c
from ..numpy import linalg as _linalg
from ..numpy import ufuncs as _ufuncs
from .devices import place


def strong(x):
    """x without a weak type: the standard has none (a Python scalar made into an
    array is an array of its default dtype)."""
    if x.aval.weak_type:
        return lax.convert_element_type(x, x.dtype, False)
    return x


def _made(x, device):
    """A new array as the standard has it: strongly typed, on `device`."""
    return place(strong(x), device)


def _fill_dtype(fill_value, dtype):
    if dtype is not None:
        return dtype
    if isinstance(fill_value, ArrayMethods):
        return fill_value.dtype
    return dtypes.dtype_of_python_scalar(fill_value)


def asarray(obj, /, *, dtype=None, device=None, copy=None):
    """An array from an array, a Python scalar, a (nested) sequence or a buffer.
    fgrad arrays are immutable, so sharing one is never observable: copy=False
    refuses only when the data must be converted (a change of dtype, or data
    that is not already an fgrad array)."""
    if copy is False:
        if not isinstance(obj, ArrayMethods) or (dtype is not None
                                                 and np.dtype(dtype) != obj.dtype):
            raise ValueError("asarray(copy=False): this input needs a copy (it is not an "
                             "fgrad array of the requested dtype); pass copy=None")
    out = _c.array(obj, dtype=dtype) if copy else _c.asarray(obj, dtype=dtype)
    return _made(out, device)


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    return _made(_c.arange(start, stop, step, dtype=dtype), device)


def empty(shape, *, dtype=None, device=None):
    return _made(_c.empty(shape, dtype=dtype), device)


def zeros(shape, *, dtype=None, device=None):
    return _made(_c.zeros(shape, dtype=dtype), device)


def ones(shape, *, dtype=None, device=None):
    return _made(_c.ones(shape, dtype=dtype), device)


def full(shape, fill_value, *, dtype=None, device=None):
    return _made(_c.full(shape, fill_value, dtype=_fill_dtype(fill_value, dtype)), device)


def empty_like(x, /, *, dtype=None, device=None):
    return _made(_c.empty_like(x, dtype=dtype), device)


def zeros_like(x, /, *, dtype=None, device=None):
    return _made(_c.zeros_like(x, dtype=dtype), device)


def ones_like(x, /, *, dtype=None, device=None):
    return _made(_c.ones_like(x, dtype=dtype), device)


def full_like(x, /, fill_value, *, dtype=None, device=None):
    return _made(_c.full_like(x, fill_value, dtype=dtype or x.dtype), device)


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    return _made(_c.eye(n_rows, n_cols, k=k, dtype=dtype), device)


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    return _made(_c.linspace(start, stop, num, endpoint=endpoint, dtype=dtype), device)


def meshgrid(*arrays, indexing="xy"):
    """Coordinate grids of 1-D arrays, as a tuple (indexing 'xy' or 'ij')."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    return tuple(_c.meshgrid(*arrays, indexing=indexing))


def tril(x, /, *, k=0):
    return _linalg.tril(x, k)


def triu(x, /, *, k=0):
    return _linalg.triu(x, k)


def from_dlpack(x, /, *, device=None, copy=None):
    """An array from any object with __dlpack__: fgrad.from_dlpack where fgrad has
    it (zero-copy), else a copy through NumPy (then copy=False is refused)."""
    import fgrad
    native = getattr(fgrad, "from_dlpack", None)
    if native is not None:
        return native(x, device=device, copy=copy)
    if copy is False:
        raise ValueError("from_dlpack(copy=False): this fgrad build copies DLPack data")
    return _made(_c.array(np.from_dlpack(x)), device)



def astype(x, dtype, /, *, copy=True, device=None):
    """x converted to `dtype` (any kind to any kind, as the standard allows);
    copy=False returns x itself when it already has that dtype."""
    if not copy and x.dtype == dtype and not x.aval.weak_type:
        return place(x, device)
    return _made(_ufuncs.astype(x, dtype), device)
