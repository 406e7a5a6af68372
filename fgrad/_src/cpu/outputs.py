"""Big output arrays of native kernels, on memory that is reused.

A fresh array of tens of megabytes comes from mmap: its pages fault in (and
are zeroed by the kernel) while the program writes them, which costs as much
as the computation (sin(x)·y + exp(-x²) on 10^7 float32: 9.5 ms with fresh
outputs, 6.5 ms in place). So an output of `MIN_BYTES` or more is a view of a
buffer this module keeps: a buffer is handed out again once nothing but the
pool refers to it (the caller dropped every array viewing it). Each output is
still a new array object that nothing else holds; only its memory is recycled.

At most `PER_SIZE` buffers per size are kept, and `FGRAD_OUTPUT_CACHE_MB`
(default 256; 0 turns reuse off) bounds the bytes kept in all: a new buffer
that would pass the bound first drops unused buffers of other sizes (oldest
size first); beyond that, outputs are plain `np.empty`.

Collectives (fgrad.distributed) reuse outputs from `COLLECTIVE_BYTES`: MPI
allocates and frees temporary buffers of the message's size in every call, and
freeing those and a fresh output together makes malloc return the heap's top to
the system, so each call faulted its pages in again (on 2 ranks: 65 page faults
per 256 KB allreduce, 353 per 1 MB; none into a reused output). Below 128 KB,
malloc serves both from its heap without returning memory.
"""
import functools
import math
import os
import sys
import threading

import numpy as np

MIN_BYTES = 1 << 23
COLLECTIVE_BYTES = 1 << 17
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


def is_big(shape, dtype, min_bytes=MIN_BYTES):
    """Whether outputs of this shape and dtype are served from reused memory."""
    return math.prod(shape) * np.dtype(dtype).itemsize >= min_bytes


def allocator(out_specs, collective=False):
    """The `empty` for a native call's outputs ((shape, dtype) each): this module's
    when some output is big (from `COLLECTIVE_BYTES` when the call runs a
    collective), else np.empty."""
    least = COLLECTIVE_BYTES if collective else MIN_BYTES
    if not any(is_big(shape, dt, least) for shape, dt in out_specs):
        return np.empty
    return empty if least == MIN_BYTES else functools.partial(empty, min_bytes=least)


def empty(shape, dtype, min_bytes=MIN_BYTES):
    """An uninitialised C-contiguous array, on reused memory from `min_bytes` (see
    the module docstring)."""
    dt = np.dtype(dtype)
    nbytes = math.prod(shape) * dt.itemsize
    if nbytes < min_bytes:
        return np.empty(shape, dt)
    with _lock:
        kept = _buffers.setdefault(nbytes, [])
        for buf in kept:
            if sys.getrefcount(buf) == 3:    # the list, `buf`, the argument: unused
                return buf.view(dt).reshape(shape)
        if len(kept) < PER_SIZE:
            limit = _limit()
            if _kept[0] + nbytes > limit >= nbytes:
                _drop_unused(limit - nbytes)
            if _kept[0] + nbytes <= limit:
                buf = np.empty(nbytes, np.uint8)
                kept.append(buf)
                _kept[0] += nbytes
                return buf.view(dt).reshape(shape)
    return np.empty(shape, dt)


def _drop_unused(target):
    """Forget unused buffers, oldest size first, until at most `target` bytes are kept."""
    for size, kept in _buffers.items():
        for i in reversed(range(len(kept))):
            if _kept[0] <= target:
                return
            if sys.getrefcount(kept[i]) == 2:    # the list, the argument: unused
                del kept[i]
                _kept[0] -= size


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
