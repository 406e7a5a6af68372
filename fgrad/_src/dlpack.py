"""DLPack: handing arrays to other libraries and taking theirs, without copies.

Export (`Array.__dlpack__`, `Array.__dlpack_device__`): the consumer gets the
Array's own buffer. Arrays are immutable, so a consumer that speaks DLPack 1.0
(NumPy >= 2.1 does; it asks with `max_version`) receives it flagged read-only
and NumPy makes a read-only array of it. A consumer of the older protocol gets
the buffer unflagged (that protocol has no read-only flag), and PyTorch and
CuPy have no read-only arrays at all: writing into what they received changes
the fgrad Array too, which fgrad assumes never happens. Ask for `copy=True`
(or copy on the consumer's side: `torch.from_dlpack(x).clone()`) to write.

Import (`fgrad.from_dlpack`): the Array shares the producer's buffer, strides
included, unless `copy=True` or a `device` other than the producer's asks for
a copy (`copy=False` then raises BufferError); a dtype fgrad lacks is a TypeError. The producer must not write into a buffer it shared while the
Array lives. A jitted function copies a non-C-contiguous input on each call;
`copy=True` makes one C-contiguous copy up front.
"""
import numpy as np

from . import dtypes, placement
from .core import Array, Tracer

CPU_DEVICE_TYPE = 1     # DLPack's kDLCPU
_VERSIONED = (1, 0)     # the first DLPack version with a read-only flag


def export(value, stream, max_version, dl_device, copy):
    """The DLPack capsule of an Array's value (see the module docstring)."""
    kwargs = {k: v for k, v in (("stream", stream), ("max_version", max_version),
                                ("dl_device", dl_device), ("copy", copy)) if v is not None}
    if placement.platform_of(value) is not None:
        return value.__dlpack__(**kwargs)        # the device library's own export
    value = np.asarray(value)
    if copy:
        return np.array(value, order="C").__dlpack__(**kwargs)
    if max_version is not None and tuple(max_version) >= _VERSIONED:
        view = value.view()
        view.flags.writeable = False             # exported with DLPack's read-only flag
        return view.__dlpack__(**kwargs)
    if not value.flags.writeable:                # a legacy capsule cannot say read-only
        if copy is False:
            raise BufferError("Array.__dlpack__: this array's buffer is read-only and the "
                              "legacy (pre-1.0) DLPack protocol cannot say so; allow a copy "
                              "or ask with max_version=(1, 0)")
        value = value.copy()
    return value.__dlpack__(**kwargs)


def device(value):
    """`__dlpack_device__` of an Array's value: (device type, device id)."""
    if placement.platform_of(value) is not None:
        return value.__dlpack_device__()
    return (CPU_DEVICE_TYPE, 0)


def from_dlpack(x, device=None, copy=None):
    """An fgrad Array sharing the memory of `x`, any object with `__dlpack__` and
    `__dlpack_device__` (a NumPy array, a PyTorch tensor, a CuPy array, an Array).

    device: an fgrad Device to put the result on (default: where `x` lives; a
    different one copies). copy: None to share when possible and copy otherwise,
    True to always copy (C-contiguous), False to never copy (BufferError when a
    copy is needed). See fgrad/_src/dlpack.py for what sharing means for writes.
    """
    if isinstance(x, Tracer):
        x.__dlpack__()                           # raises: traced values cannot be exported
    if not (hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__")):
        raise TypeError(f"from_dlpack: a {type(x).__name__} does not support DLPack (no "
                        f"__dlpack__/__dlpack_device__).\n  hint: fgrad.numpy.asarray(x) "
                        f"converts sequences and objects with __array__")
    kind, device_id = x.__dlpack_device__()
    if kind == CPU_DEVICE_TYPE:
        value = np.from_dlpack(x, copy=False if copy is False else None)
        if copy:
            value = np.array(value, order="C")
    else:
        backend = placement.platform_for_dlpack(kind)
        if backend is None:
            raise BufferError(f"from_dlpack: the {type(x).__name__} lives on DLPack device "
                              f"type {kind} (id {device_id}), for which fgrad has no backend")
        value = backend.from_dlpack(x, copy)
    dtypes.canonicalize(value.dtype)             # a clear error for dtypes fgrad lacks
    out = Array(value)
    if device is not None and device != out.device:
        if copy is False:
            raise BufferError(f"from_dlpack: the data is on {out.device!r}; moving it to "
                              f"{device!r} needs a copy (copy=False)")
        from .devices import device_put
        out = device_put(out, device)
    return out
