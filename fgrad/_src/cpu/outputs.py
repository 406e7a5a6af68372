"""Big output arrays of native kernels, on memory that is reused.

A fresh array of tens of megabytes comes from mmap: its pages fault in (and
are zeroed by the kernel) while the program writes them, which costs as much
as the computation (sin(x)·y + exp(-x²) on 10^7 float32: 9.5 ms with fresh
outputs, 6.5 ms in place). So an output of `MIN_BYTES` or more is a view of a
buffer this module keeps: a buffer is handed out again once nothing but the
pool refers to it (the caller dropped every array viewing it). Each output is
still a new array object that nothing else holds; only its memory is recycled.

At most `PER_SIZE` buffers per size are kept, and `FGRAD_OUTPUT_CACHE_MB`
(default 256; 0 turns reuse off) bounds the bytes kept in all; beyond that,
outputs are plain `np.empty`.
"""
import math
import os
import sys
import threading

import numpy as np

MIN_BYTES = 1 << 23
PER_SIZE = 2

_lock = threading.Lock()
if hasattr(os, "register_at_fork"):  # a child must not inherit a lock another thread held
    os.register_at_fork(after_in_child=lambda: globals().update(_lock=threading.Lock()))
_buffers = {}            # nbytes -> [uint8 buffers]
_kept = [0]              # bytes in _buffers


def _limit():
    value = os.environ.get("FGRAD_OUTPUT_CACHE_MB", "256")
    try:
        return max(0, int(value)) << 20
    except ValueError:
        raise ValueError(f"FGRAD_OUTPUT_CACHE_MB={value!r} is not a whole number of "
                         f"megabytes; unset it or set e.g. FGRAD_OUTPUT_CACHE_MB=0") from None


def is_big(shape, dtype):
    """Whether outputs of this shape and dtype are served from reused memory."""
    return math.prod(shape) * np.dtype(dtype).itemsize >= MIN_BYTES


def empty(shape, dtype):
    """An uninitialised C-contiguous array (see the module docstring)."""
    dt = np.dtype(dtype)
    nbytes = math.prod(shape) * dt.itemsize
    if nbytes < MIN_BYTES:
        return np.empty(shape, dt)
    with _lock:
        kept = _buffers.setdefault(nbytes, [])
        for buf in kept:
            if sys.getrefcount(buf) == 3:    # the list, `buf`, the argument: unused
                return buf.view(dt).reshape(shape)
        if len(kept) < PER_SIZE and _kept[0] + nbytes <= _limit():
            buf = np.empty(nbytes, np.uint8)
            kept.append(buf)
            _kept[0] += nbytes
            return buf.view(dt).reshape(shape)
    return np.empty(shape, dt)


def kept(buf):
    """1 when `buf` is one of the buffers this module keeps (it holds one reference
    to it), else 0."""
    return int(any(b is buf for b in _buffers.get(buf.nbytes, ())))


def release():
    """Forget every kept buffer (arrays still viewing one keep it alive)."""
    with _lock:
        _buffers.clear()
        _kept[0] = 0


def allocate(out_specs, empty, xs, inplace, in_specs):
    """The outputs of a native call ((shape, dtype) each): output j is xs[k] itself
    where `inplace` maps j to k (a donated input) and xs[k] is a writeable
    C-contiguous ndarray of the dtype object and shape `in_specs[k]` promises;
    every other output is `empty(shape, dtype)` (nothing is allocated only to be
    dropped: big allocations cost system calls)."""
    if not inplace:
        return [empty(shape, dt) for shape, dt in out_specs]
    outs = [None] * len(out_specs)
    for j, k in inplace.items():
        x = xs[k]
        dt, shape = in_specs[k]
        if type(x) is np.ndarray and x.dtype is dt and x.shape == shape \
                and x.flags.c_contiguous and x.flags.writeable:
            outs[j] = x
    return [empty(*out_specs[j]) if o is None else o for j, o in enumerate(outs)]
