"""The decompositions as native calls of LAPACK (the CPU backend's linear-algebra
kernels).

Where the routines come from: `scipy.linalg.cython_lapack.__pyx_capi__` holds
one PyCapsule per LAPACK routine, wrapping the address of a function that
takes every argument by pointer (Fortran's convention, 32-bit integers). Each
routine a kernel may call is registered with `engine.add_symbol` under
`fgrad_lapack_<routine>` (the dynamic linker knows no such name, so modules
calling them are loaded by MCJIT; `engine.add_symbol` documents that).

Which OpenBLAS: those capsules lead into the OpenBLAS that SciPy's wheel
bundles (`scipy.libs/libscipy_openblas-*.so`: 0.3.30, 32-bit integers), not
into NumPy's (`numpy.libs/libscipy_openblas64_*.so`: 0.3.31, 64-bit
integers), whose gemm the matmuls call (see `blas`). NumPy's copy carries
LAPACK too, but the eager impls in `lax/linalg.py` call `scipy.linalg.lapack`,
whose routines are the very functions the capsules point at, so jit and eager
run the same code and give the same bits; NumPy's copy, another OpenBLAS
version, need not. The price of a second copy is its own thread pool: see
`fused.parallel_plan`, which keeps fgrad's workers out of segments that make
big LAPACK calls.

Each kernel has the signature of a fused group's body,

    i1 fname_body(ptr operands..., ptr outputs..., i64, i64)

(the range is ignored: a decomposition is never split over threads). It loops
over the batch (the leading dims), copies each matrix into a column-major
buffer as LAPACK wants it, calls the routine(s) exactly as the eager impl
does (same routine, same arguments, same workspace sizes: queried with
lwork = -1 where the impl queries, found once per call), treats info != 0 as
the impl does (a NaN-filled result) and writes the outputs in row-major
order. Buffers are malloc'd once per call and freed before it returns.
"""
import ctypes
import math

import numpy as np

from . import loops

NAMES = frozenset({"cholesky", "triangular_solve", "lu", "qr", "eigh", "svd"})
_PREFIX = {np.dtype(np.float32): "s", np.dtype(np.float64): "d"}
# every routine a kernel may call (each in its s and d flavour)
_ROUTINES = ("potrf", "trtrs", "getrf", "geqrf", "orgqr", "syevd", "gesdd")
_registered = None


def _symbol(routine):
    return "fgrad_lapack_" + routine


def _capsule_address(capsule):
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return get_pointer(capsule, get_name(capsule))


def available():
    """Whether LAPACK can be called from native code (registers the routines once)."""
    global _registered
    if _registered is None:
        _registered = False
        try:
            from scipy.linalg import cython_lapack
            capsules = cython_lapack.__pyx_capi__
            addresses = {p + r: _capsule_address(capsules[p + r])
                         for r in _ROUTINES for p in "sd"}
        except (ImportError, AttributeError, KeyError, ValueError):
            return False
        if all(addresses.values()):
            from . import engine
            for name, address in addresses.items():
                engine.add_symbol(_symbol(name), address)
            _registered = True
    return _registered


class _Kernel:
    """The IR building blocks of one LAPACK kernel: its body function, scalar
    arguments in entry-block allocas, calls, copies between row-major arrays and
    column-major buffers, malloc'd buffers."""

    def __init__(self, ir, module, fname, eqn):
        self.ir, self.module, self.eqn = ir, module, eqn
        self.dtype = np.dtype(eqn.invars[0].aval.dtype)
        self.prefix = _PREFIX[self.dtype]
        self.ptr, self.i1 = ir.PointerType(), ir.IntType(1)
        self.i8, self.i32, self.i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
        self.real = ir.FloatType() if self.dtype.itemsize == 4 else ir.DoubleType()
        n_in, n_out = len(eqn.invars), len(eqn.outvars)
        self.fn = ir.Function(module, ir.FunctionType(
            self.i1, [self.ptr] * (n_in + n_out) + [self.i64, self.i64]), fname + "_body")
        self.fn.linkage = "internal"
        self.ins, self.outs = self.fn.args[:n_in], self.fn.args[n_in:n_in + n_out]
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self._into_body = self.b.branch(self.fn.append_basic_block("body"))
        self.b.position_at_end(self._into_body.operands[0])
        self._malloc = loops.declare(ir, module, "malloc", self.ptr, [self.i64])
        self._free = loops.declare(ir, module, "free", ir.VoidType(), [self.ptr])
        self._buffers = []

    # scalars and calls

    def const(self, v, typ=None):
        return v if isinstance(v, self.ir.Value) else self.ir.Constant(typ or self.i64, int(v))

    def slot(self, typ, value=None):
        """A pointer to an entry-block alloca of `typ` (storing `value` here)."""
        here = self.b.block
        self.b.position_before(self._into_body)
        p = self.b.alloca(typ)
        self.b.position_at_end(here)
        if value is not None:
            self.b.store(value, p)
        return p

    def integer(self, value):
        """A pointer to a Fortran INTEGER (i32) holding `value` (int or i64)."""
        v = value if isinstance(value, self.ir.Value) else self.const(value)
        return self.slot(self.i32, self.b.trunc(v, self.i32) if v.type == self.i64 else v)

    def char(self, c):
        return self.slot(self.i8, self.ir.Constant(self.i8, ord(c)))

    def call(self, routine, args):
        """Call the LAPACK routine of this dtype (e.g. "potrf" -> dpotrf)."""
        name = _symbol(self.prefix + routine)
        fn = loops.declare(self.ir, self.module, name, self.ir.VoidType(), [self.ptr] * len(args))
        self.b.call(fn, args)

    def load_int(self, p):
        return self.b.sext(self.b.load(p, typ=self.i32), self.i64)

    # memory

    def buffer(self, count, itemsize=None):
        """A malloc'd buffer of `count` (int or i64) elements of `itemsize` bytes
        (the dtype's), freed by `finish`."""
        n = self.b.mul(self.const(count), self.const(itemsize or self.dtype.itemsize))
        p = self.b.call(self._malloc, [self.b.add(n, self.const(16))])
        self._buffers.append(p)
        return p

    def at(self, p, index, typ=None):
        typ = typ or self.real
        return self.b.gep(p, [self.const(index)], inbounds=True, source_etype=typ)

    def finish(self):
        for p in self._buffers:
            self.b.call(self._free, [p])
        self.b.ret(self.ir.Constant(self.i1, 0))
        return self.fn

    # loops and copies

    def loop(self, count, body, name="i"):
        """for i in range(count) (a Python int): body(i)."""
        loops.loop(self.ir, self.b, self.fn, 0, count, body, name)

    def batch(self, count, body):
        self.loop(count, body, "batch")

    def to_columns(self, src, offset, rows, cols, dst, ld):
        """dst[i + j*ld] = src[offset + i*cols + j]: a row-major (rows, cols) matrix
        into a column-major buffer."""
        b = self.b

        def row(i):
            def column(j):
                v = b.load(self.at(src, b.add(offset, b.add(b.mul(i, self.const(cols)), j))),
                           typ=self.real)
                b.store(v, self.at(dst, b.add(i, b.mul(j, self.const(ld)))))
            self.loop(cols, column, "j")
        self.loop(rows, row, "i")

    def from_columns(self, src, ld, rows, cols, dst, offset, keep=None):
        """dst[offset + i*cols + j] = src[i + j*ld] (or 0 where keep(i, j), an i1,
        is false): a column-major buffer into a row-major (rows, cols) matrix."""
        b = self.b
        zero = self.ir.Constant(self.real, 0.0)

        def row(i):
            def column(j):
                v = b.load(self.at(src, b.add(i, b.mul(j, self.const(ld)))), typ=self.real)
                if keep is not None:
                    v = b.select(keep(i, j), v, zero)
                b.store(v, self.at(dst, b.add(offset, b.add(b.mul(i, self.const(cols)), j))))
            self.loop(cols, column, "j")
        self.loop(rows, row, "i")

    def copy(self, src, src_offset, dst, dst_offset, count, typ=None):
        """dst[dst_offset + k] = src[src_offset + k] for k < count."""
        typ, b = typ or self.real, self.b

        def one(k):
            v = b.load(self.at(src, b.add(src_offset, k), typ), typ=typ)
            b.store(v, self.at(dst, b.add(dst_offset, k), typ))
        self.loop(count, one, "k")

    def fill_nan(self, dst, offset, count):
        nan = self.ir.Constant(self.real, float("nan"))
        self.loop(count, lambda k: self.b.store(nan, self.at(dst, self.b.add(offset, k))), "k")

    def if_failed(self, info, then):
        """then() when the INTEGER at `info` is not 0."""
        with self.b.if_then(self.b.icmp_signed("!=", self.b.load(info, typ=self.i32),
                                               self.ir.Constant(self.i32, 0)), likely=False):
            then()
