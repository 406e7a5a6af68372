"""fgrad.lax: the primitives and thin functions that bind them.

These functions do not promote dtypes (operands of one op share a dtype) but
do broadcast like NumPy; Python scalars take the dtype of the other operand.
"""
import numpy as _np

from ..core import Array as _Array, Primitive as _Primitive
from . import elementwise as _elementwise
from .special import (digamma, erfc, zeta, gammaln as lgamma,  # noqa: F401  (JAX's names)
                      gammainc as igamma, gammaincc as igammac, i0e as bessel_i0e,
                      i1e as bessel_i1e, betainc as regularized_incomplete_beta)
from .shape_ops import (broadcast_in_dim, broadcast_in_dim_p, broadcast_to, expand_dims,  # noqa: F401
                        expand_dims_p, reshape, reshape_p, squeeze, squeeze_p, transpose,
                        transpose_p)
from .reductions import (argmax, argmax_p, argmin, argmin_p, reduce_max,  # noqa: F401
                         reduce_max_p, reduce_min, reduce_min_p, reduce_sum, reduce_sum_p)
from .reductions import (reduce_and, reduce_and_p, reduce_or, reduce_or_p, reduce_prod,  # noqa: F401
                         reduce_prod_p)
from .slicing import (concatenate, concatenate_p, dynamic_slice, dynamic_slice_p,  # noqa: F401
                      dynamic_update_slice, dynamic_update_slice_p, iota, iota_p, pad, pad_p,
                      rev, rev_p, slice, slice_in_dim, slice_p)
from .gather_scatter import (gather, gather_p, scatter, scatter_add, scatter_add_p,  # noqa: F401
                             scatter_max, scatter_max_p, scatter_min, scatter_min_p,
                             scatter_mul, scatter_mul_p, scatter_p)
from .dot_general import dot_general, dot_general_p  # noqa: F401
from .sorting import sort, sort_key_val, sort_p  # noqa: F401
from .cumulative import (cummax, cummax_p, cummin, cummin_p, cumprod, cumprod_p,  # noqa: F401
                         cumsum, cumsum_p)
from .fft import FftType, fft, fft_p  # noqa: F401
from .convolution import (ConvDimensionNumbers, conv, conv_dimension_numbers,  # noqa: F401
                          conv_general_dilated, conv_general_dilated_p, conv_transpose,
                          conv_with_general_padding, padtype_to_pads)
from .windows import (reduce_window_max, reduce_window_max_p,  # noqa: F401
                      select_and_gather_add_p, select_and_scatter_add_p)
from .control_flow import (cond, cond_p, fori_loop, map, scan, scan_p, switch,  # noqa: F401
                           while_loop, while_p)
from .in_dim import (dynamic_index_in_dim, dynamic_slice_in_dim,  # noqa: F401
                     dynamic_update_index_in_dim, dynamic_update_slice_in_dim, index_in_dim)


def full(shape, fill_value, dtype):
    """A constant array (computed now, whatever the current trace)."""
    return _Array(_np.full(tuple(shape), fill_value, dtype=dtype), False)


def zeros(shape, dtype):
    return full(shape, 0, dtype)


def zeros_like(x):
    return full(x.shape, 0, x.dtype)


def _public_elementwise():
    """The element-wise module's primitives and the functions that bind them."""
    for name, value in vars(_elementwise).items():
        if name.startswith("_"):
            continue
        if isinstance(value, _Primitive) or (callable(value) and not isinstance(value, type)
                                            and value.__module__ == _elementwise.__name__):
            yield name, value


globals().update(_public_elementwise())
__all__ = sorted(name for name, value in globals().items()
                 if not name.startswith("_") and (isinstance(value, _Primitive) or callable(value))
                 and getattr(value, "__module__", "").startswith(__name__))
