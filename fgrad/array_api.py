"""fgrad's namespace for the Python Array API standard, version 2023.12: what
`x.__array_namespace__()` returns, so code written against the standard (and
libraries that dispatch through array-api-compat, such as scikit-learn) runs on
fgrad arrays.

It is fgrad.numpy where NumPy and the standard agree, with thin adapters where
they differ (names like acos and pow, keyword-only axis arguments, std/var's
`correction`, unique_*, tuples for several results, promotion by dtype alone).
Defaults are fgrad's: its default float (float32 unless set otherwise) and
int32. Everything here works under jit, grad and vmap except what needs
data-dependent shapes (nonzero, unique_*, boolean masks), which runs on
concrete arrays. The `linalg` and `fft` extensions are fgrad.numpy.linalg and
fgrad.numpy.fft where this build has them.
"""
import importlib as _importlib
import math as _math

from fgrad._src.array_api import elementwise as _elementwise
from fgrad._src.numpy import linalg as _nplinalg
from fgrad._src.numpy import shape as _npshape

__array_api_version__ = "2023.12"

globals().update(_elementwise.functions())
from fgrad._src.array_api.elementwise import clip, round, where  # noqa: E402,F401
from fgrad._src.array_api.creation import (  # noqa: E402,F401
    arange, asarray, astype, empty, empty_like, eye, from_dlpack, full, full_like, linspace,
    meshgrid, ones, ones_like, tril, triu, zeros, zeros_like)
from fgrad._src.array_api.data_types import (  # noqa: E402,F401
    bool, can_cast, finfo, float32, float64, iinfo, int8, int16, int32, int64, isdtype,
    result_type, uint8, uint16, uint32, uint64)
from fgrad._src.array_api.manipulation import (  # noqa: E402,F401
    argmax, argmin, argsort, broadcast_arrays, broadcast_to, concat, expand_dims, flip,
    moveaxis, nonzero, permute_dims, repeat, reshape, roll, searchsorted, sort, squeeze,
    stack, take, tensordot, tile, unstack)
from fgrad._src.array_api.sets import (  # noqa: E402,F401
    unique_all, unique_counts, unique_inverse, unique_values)
from fgrad._src.array_api.statistics import (  # noqa: E402,F401
    all, any, cumulative_sum, max, mean, min, prod, std, sum, var)
from fgrad._src.array_api.info import __array_namespace_info__  # noqa: E402,F401

matmul = _nplinalg.matmul
vecdot = _nplinalg.vecdot
matrix_transpose = _npshape.matrix_transpose

e, inf, nan, pi = _math.e, _math.inf, _math.nan, _math.pi
newaxis = None


def _extension(name):
    """fgrad.numpy.<name> when this build has it (the standard's optional extension)."""
    try:
        return _importlib.import_module(f"fgrad.numpy.{name}")
    except ImportError:
        return None


linalg = _extension("linalg")
fft = _extension("fft")
if linalg is None:
    del linalg
if fft is None:
    del fft

__all__ = sorted(n for n in globals() if not n.startswith("_")
                 or n in ("__array_api_version__", "__array_namespace_info__"))
