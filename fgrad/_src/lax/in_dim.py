"""One-axis forms of slice / dynamic_slice / dynamic_update_slice, as JAX code
calls them (lax.dynamic_slice_in_dim(x, i, n, axis) and friends).

Compositions of the primitives in slicing.py: they differentiate, batch and
compile as those do. Start indices may be traced; sizes and axes are static.
"""
from ..core import full_lower
from ..errors import FgradTypeError
from .shape_ops import reshape
from .slicing import dynamic_slice, dynamic_update_slice, slice_in_dim


def _axis(name, axis, ndim):
    if not isinstance(axis, int) or not -ndim <= axis < max(ndim, 1):
        raise FgradTypeError(f"{name}: axis {axis!r} is out of range for an array of "
                             f"{ndim} dimensions", hint=f"pass an int in [-{ndim}, {ndim})")
    return axis % ndim


def _starts(operand, axis, index):
    """Start indices: `index` on `axis`, 0 on the others."""
    return [full_lower(index) if d == axis else 0 for d in range(operand.ndim)]


def dynamic_slice_in_dim(operand, start_index, slice_size, axis=0):
    """operand[..., start:start+slice_size, ...] on `axis` (start may be traced; it is
    clamped so the window fits, as dynamic_slice does)."""
    axis = _axis("dynamic_slice_in_dim", axis, operand.ndim)
    sizes = list(operand.shape)
    sizes[axis] = int(slice_size)
    return dynamic_slice(operand, _starts(operand, axis, start_index), sizes)


def dynamic_update_slice_in_dim(operand, update, start_index, axis):
    """operand with update written from start_index on `axis` (other axes from 0)."""
    axis = _axis("dynamic_update_slice_in_dim", axis, operand.ndim)
    return dynamic_update_slice(operand, update, _starts(operand, axis, start_index))


def index_in_dim(operand, index, axis=0, keepdims=True):
    """operand[..., index, ...] on `axis` for a static int index (negative counts from
    the end); keepdims=False drops the axis."""
    axis = _axis("index_in_dim", axis, operand.ndim)
    n = operand.shape[axis]
    if not isinstance(index, int) or not -n <= index < n:
        raise FgradTypeError(f"index_in_dim: index {index!r} is out of range for axis {axis} "
                             f"of size {n}", hint="use dynamic_index_in_dim for a traced index")
    index %= n
    out = slice_in_dim(operand, index, index + 1, 1, axis)
    return out if keepdims else _drop(out, axis)


def dynamic_index_in_dim(operand, index, axis=0, keepdims=True):
    """operand[..., index, ...] on `axis` for an index that may be traced (clamped)."""
    out = dynamic_slice_in_dim(operand, index, 1, axis)
    return out if keepdims else _drop(out, _axis("dynamic_index_in_dim", axis, operand.ndim))


def dynamic_update_index_in_dim(operand, update, index, axis):
    """operand with position `index` on `axis` replaced by update (which may lack
    that axis)."""
    axis = _axis("dynamic_update_index_in_dim", axis, operand.ndim)
    if update.ndim == operand.ndim - 1:
        shape = list(update.shape)
        shape.insert(axis, 1)
        update = reshape(update, shape)
    return dynamic_update_slice_in_dim(operand, update, index, axis)


def _drop(x, axis):
    shape = list(x.shape)
    del shape[axis]
    return reshape(x, shape)
