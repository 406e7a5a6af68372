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
version, need not. (JAX's CPU backend takes its LAPACK from the same capsules.)
The price of a second copy is its own thread pool: see `fused.parallel_plan`,
which keeps fgrad's workers out of segments that call LAPACK, and the bench
README on two threads.

Each kernel has the signature of a fused group's body,

    i1 fname_body(ptr operands..., ptr outputs..., i64, i64)

(the range is ignored: a decomposition is never split over threads). Every
dtype these primitives take is lowered: float32, float64, complex64 and
complex128 (s-, d-, c- and z- routines; ?ungqr and ?heevd for complex), and
eig's complex results of a real matrix are assembled natively. It
loops over the batch (the leading dims), copies each matrix into a
column-major buffer as LAPACK wants it, calls the routine(s) exactly as the
eager impl does (same routine, same arguments, same workspace sizes: queried with
lwork = -1 where the impl queries, found once per call), treats info != 0 as
the impl does (a NaN-filled result) and writes the outputs in row-major
order. Real matrices are transposed in 8x8 blocks of vector shuffles, complex
ones element by element. The triangular solve and the inverse transpose
nothing: a row-major matrix read column-major is its transpose, so trsm solves
the transposed system on the operands as they lie, and getrf/getri invert a.T
in place (the impls call them so too). Buffers are malloc'd once per call and
freed before it returns.
"""
import ctypes
import math

import numpy as np

from ..jaxpr import Var
from . import loops

NAMES = frozenset({"cholesky", "triangular_solve", "lu", "inv", "qr", "eigh", "svd", "eig"})
_PREFIX = {np.dtype(np.float32): "s", np.dtype(np.float64): "d",
           np.dtype(np.complex64): "c", np.dtype(np.complex128): "z"}
# every routine a kernel may call: LAPACK's (real ones, complex ones, both),
# and the one BLAS routine the triangular solve calls (from cython_blas)
_REAL, _COMPLEX, _BOTH = "sd", "cz", "sdcz"
_ROUTINES = {"potrf": _BOTH, "getrf": _BOTH, "getri": _BOTH, "geqrf": _BOTH, "gesdd": _BOTH,
             "geev": _BOTH, "orgqr": _REAL, "syevd": _REAL, "ungqr": _COMPLEX, "heevd": _COMPLEX}
_BLAS_ROUTINES = {"trsm": _BOTH}
_registered = None
_ALIGN = 64
_TILE = 8            # elements a transposing copy moves side by side


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
            from scipy.linalg import cython_blas, cython_lapack
            addresses = {p + r: _capsule_address(module.__pyx_capi__[p + r])
                         for module, routines in ((cython_lapack, _ROUTINES),
                                                  (cython_blas, _BLAS_ROUTINES))
                         for r, prefixes in routines.items() for p in prefixes}
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
        self.complex = self.dtype.kind == "c"
        self.real_size = self.dtype.itemsize // (2 if self.complex else 1)
        self.real = ir.FloatType() if self.real_size == 4 else ir.DoubleType()
        # an element: a real, or a complex number's (real, imaginary) pair
        self.elem = ir.ArrayType(self.real, 2) if self.complex else self.real
        n_in, n_out = len(eqn.invars), len(eqn.outvars)
        self.fn = ir.Function(module, ir.FunctionType(
            self.i1, [self.ptr] * (n_in + n_out) + [self.i64, self.i64]), fname + "_body")
        self.fn.linkage = "internal"
        self.ins, self.outs = self.fn.args[:n_in], self.fn.args[n_in:n_in + n_out]
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        body = self.fn.append_basic_block("body")
        self._into_body = self.b.branch(body)       # entry: allocas (see slot)
        self.b.position_at_end(body)
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
        (the dtype's), 64-byte aligned as NumPy's big arrays are, freed by
        `finish`."""
        b = self.b
        n = b.mul(self.const(count), self.const(itemsize or self.dtype.itemsize))
        raw = b.call(self._malloc, [b.add(n, self.const(_ALIGN))])
        self._buffers.append(raw)
        address = b.ptrtoint(raw, self.i64)
        aligned = b.and_(b.add(address, self.const(_ALIGN - 1)), self.const(-_ALIGN))
        return b.gep(raw, [b.sub(aligned, address)], inbounds=True, source_etype=self.i8)

    def scalar(self, value):
        """An element constant: `value` (a complex number's real part)."""
        if not self.complex:
            return self.ir.Constant(self.real, value)
        return self.ir.Constant(self.elem, [self.ir.Constant(self.real, value),
                                            self.ir.Constant(self.real, 0.0)])

    def at(self, p, index, typ=None):
        typ = typ or self.elem
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

    def tiles(self, extent, across, body, name):
        """body(x, y) for x < extent (in tiles of _TILE, unrolled within a tile) and
        y < across (a loop inside each tile): a transposing copy then reads (or
        writes) _TILE neighbours at a time and keeps _TILE streams in order on the
        other side, instead of one element per stride."""
        b = self.b
        whole, rest = divmod(extent, _TILE)

        def tile(first, width):
            self.loop(across, lambda y: [body(b.add(first, self.const(t)), y)
                                         for t in range(width)], name + "_y")
        if whole:
            self.loop(whole, lambda x: tile(b.mul(x, self.const(_TILE)), _TILE), name)
        if rest:
            tile(self.const(whole * _TILE), rest)

    def to_columns(self, src, offset, rows, cols, dst, ld, conjugate=False):
        """dst[i + j*ld] = src[offset + i*cols + j] (conjugated when asked): a
        row-major (rows, cols) matrix into a column-major buffer."""
        b = self.b

        def element(j, i):
            v = b.load(self.at(src, b.add(offset, b.add(b.mul(i, self.const(cols)), j))),
                       typ=self.elem)
            if conjugate:
                v = b.insert_value(v, b.fneg(b.extract_value(v, 1)), 1)
            b.store(v, self.at(dst, b.add(i, b.mul(j, self.const(ld)))))

        def block(i, j):        # rows i.., columns j.. of src become columns of dst
            rows_ = [self._vector(src, b.add(offset, b.add(b.mul(b.add(i, self.const(r)),
                                                                 self.const(cols)), j)))
                     for r in range(_TILE)]
            for c, column in enumerate(self._transpose(rows_)):
                self._vector(dst, b.add(i, b.mul(b.add(j, self.const(c)), self.const(ld))),
                             column)
        if self.complex:
            self.tiles(cols, rows, element, "j")
        else:
            self.blocks(rows, cols, block, lambda i, j: element(j, i))

    def from_columns(self, src, ld, rows, cols, dst, offset, keep=None):
        """dst[offset + i*cols + j] = src[i + j*ld] (or 0 where keep(i, j), an i1,
        is false): a column-major buffer into a row-major (rows, cols) matrix."""
        b = self.b
        zero = self.scalar(0.0)

        def element(i, j):
            v = b.load(self.at(src, b.add(i, b.mul(j, self.const(ld)))), typ=self.elem)
            if keep is not None:
                v = b.select(keep(i, j), v, zero)
            b.store(v, self.at(dst, b.add(offset, b.add(b.mul(i, self.const(cols)), j))))

        def block(i, j):        # columns j.., rows i.. of src become rows of dst
            columns = [self._vector(src, b.add(i, b.mul(b.add(j, self.const(c)),
                                                          self.const(ld))))
                       for c in range(_TILE)]
            for r, row in enumerate(self._transpose(columns)):
                self._vector(dst, b.add(offset, b.add(b.mul(b.add(i, self.const(r)),
                                                            self.const(cols)), j)), row)
        if self.complex or keep is not None:
            self.tiles(rows, cols, element, "i")
        else:
            self.blocks(rows, cols, block, element)

    def blocks(self, rows, cols, block, element):
        """block(i, j) for each whole _TILE x _TILE block at (i, j) of a (rows, cols)
        matrix, then element(i, j) for the rest (the ragged right and bottom edges)."""
        b = self.b
        whole_r, whole_c = rows // _TILE * _TILE, cols // _TILE * _TILE
        if whole_r and whole_c:
            self.loop(rows // _TILE, lambda bi: self.loop(
                cols // _TILE, lambda bj: block(b.mul(bi, self.const(_TILE)),
                                                b.mul(bj, self.const(_TILE))), "bj"), "bi")
        if whole_c < cols:          # the right edge, every row
            self.loop(rows, lambda i: self.loop(cols - whole_c, lambda j: element(
                i, b.add(j, self.const(whole_c))), "ej"), "ei")
        if whole_r < rows and whole_c:      # the bottom edge left of it
            self.loop(rows - whole_r, lambda i: self.loop(whole_c, lambda j: element(
                b.add(i, self.const(whole_r)), j), "fj"), "fi")

    def _vector(self, p, index, value=None):
        """Load (or store `value` as) _TILE neighbouring reals at p[index]."""
        vec = self.ir.VectorType(self.real, _TILE)
        address = self.at(p, index, self.real)
        if value is None:
            return self.b.load(address, typ=vec, align=self.real_size)
        self.b.store(value, address, align=self.real_size)

    def _transpose(self, vectors):
        """The 8 x 8 transpose of 8 vectors (rows to columns): three rounds of
        shuffles interleaving single elements, pairs, then fours."""
        b, i32 = self.b, self.i32

        def shuffle(x, y, mask):
            picks = [self.ir.Constant(i32, m) for m in mask]
            return b.shuffle_vector(x, y, self.ir.Constant(self.ir.VectorType(i32, 8), picks))
        v = list(vectors)
        a = [None] * 8
        for k in range(4):
            a[2 * k] = shuffle(v[2 * k], v[2 * k + 1], [0, 8, 2, 10, 4, 12, 6, 14])
            a[2 * k + 1] = shuffle(v[2 * k], v[2 * k + 1], [1, 9, 3, 11, 5, 13, 7, 15])
        c = [None] * 8
        for g in (0, 4):
            for j in (0, 1):
                c[g + j] = shuffle(a[g + j], a[g + j + 2], [0, 1, 8, 9, 4, 5, 12, 13])
                c[g + j + 2] = shuffle(a[g + j], a[g + j + 2], [2, 3, 10, 11, 6, 7, 14, 15])
        out = [None] * 8
        for j in range(4):
            out[j] = shuffle(c[j], c[j + 4], [0, 1, 2, 3, 8, 9, 10, 11])
            out[j + 4] = shuffle(c[j], c[j + 4], [4, 5, 6, 7, 12, 13, 14, 15])
        return out

    def copy(self, src, src_offset, dst, dst_offset, count, typ=None):
        """dst[dst_offset + k] = src[src_offset + k] for k < count (elements, or
        values of `typ`)."""
        typ, b = typ or self.elem, self.b

        def one(k):
            v = b.load(self.at(src, b.add(src_offset, k), typ), typ=typ)
            b.store(v, self.at(dst, b.add(dst_offset, k), typ))
        self.loop(count, one, "k")

    def fill_nan(self, dst, offset, count, real=False):
        """NaN (complex: NaN + 0j, as NumPy stores a NaN into a complex array) in
        `count` elements, or reals when `real`."""
        nan = self.ir.Constant(self.real, float("nan")) if real else self.scalar(float("nan"))
        self.loop(count, lambda k: self.b.store(nan, self.at(dst, self.b.add(offset, k),
                                                             nan.type)), "k")

    def unless_finite(self, src, offset, count, failed, finite, triangle=None):
        """failed() when one of the `count` elements at src[offset] is an inf or a
        NaN (either part of a complex one), else finite(): the impls check so
        instead of handing LAPACK such a matrix (it fails, printing why). With
        triangle=(n, lower), only the n×n matrix's triangle LAPACK reads counts."""
        b, ir = self.b, self.ir
        inf = ir.Constant(self.real, float("inf"))

        def check(t, ok):
            x = b.load(self.at(src, b.add(offset, t)), typ=self.elem)
            good = ir.Constant(self.i1, 1)
            for part in ([b.extract_value(x, 0), b.extract_value(x, 1)] if self.complex
                         else [x]):
                good = b.and_(good, b.and_(b.fcmp_ordered(">", part, b.fneg(inf)),
                                           b.fcmp_ordered("<", part, inf)))
            if triangle is not None:
                n, lower = self.const(triangle[0], t.type), triangle[1]
                row, col = b.udiv(t, n), b.urem(t, n)
                read = b.icmp_unsigned("<=" if lower else ">=", col, row)
                good = b.or_(good, b.not_(read))
            return b.and_(ok, good)
        ok = loops.fold(ir, b, self.fn, count, check, ir.Constant(self.i1, 1), "t")
        with b.if_else(ok, likely=True) as (then, otherwise):
            with then:
                finite()
            with otherwise:
                failed()

    def if_else(self, info, failed, succeeded):
        """failed() when the INTEGER at `info` is not 0, else succeeded()."""
        bad = self.b.icmp_signed("!=", self.b.load(info, typ=self.i32),
                                 self.ir.Constant(self.i32, 0))
        with self.b.if_else(bad, likely=False) as (then, otherwise):
            with then:
                failed()
            with otherwise:
                succeeded()

    def workspace(self, routine, args, probes):
        """Call `routine` as a workspace query (`args` hold lwork = -1, and the
        `probes` are where it writes its preferred sizes: a work array's first
        element, a real one's, an INTEGER) and return max(1, int(size)) of each,
        as the eager impl reads them (truncated; a complex size's real part);
        i64 values."""
        self.call(routine, args)
        one, sizes = self.const(1), []
        for p, kind in probes:
            if kind == "int":
                v = self.load_int(p)
            else:
                v = self.b.fptosi(self.b.load(p, typ=self.real), self.i64)
            sizes.append(self.b.select(self.b.icmp_signed("<", v, one), one, v))
        return sizes


def can_lower(eqn):
    """A decomposition of array operands of a dtype LAPACK has (float32/64,
    complex64/128) whose outputs are all non-empty, or all empty (an empty batch:
    the caller makes them)."""
    if eqn.primitive.name not in NAMES or any(type(a) is not Var for a in eqn.invars):
        return False
    if any(np.dtype(a.aval.dtype) not in _PREFIX for a in eqn.invars) or not available():
        return False
    sizes = [math.prod(v.aval.shape) for v in eqn.outvars]
    return all(sizes) or not any(sizes)


def routines(eqn):
    """The names of the routines a lowered equation calls, e.g. ['dgeqrf', 'dorgqr']."""
    dtype = np.dtype(eqn.invars[0].aval.dtype)
    return [_PREFIX[dtype] + r for r in _calls(eqn.primitive.name, dtype.kind == "c")]


def _calls(name, complex_):
    return {"cholesky": ("potrf",), "triangular_solve": ("trsm",), "lu": ("getrf",),
            "inv": ("getrf", "getri"), "qr": ("geqrf", "ungqr" if complex_ else "orgqr"),
            "eigh": ("heevd" if complex_ else "syevd",), "svd": ("gesdd",),
            "eig": ("geev",)}[name]


def emit(ir, module, fname, eqn):
    """Emit `fname_body` for a decomposition equation; returns the function."""
    k = _Kernel(ir, module, fname, eqn)
    _EMITTERS[eqn.primitive.name](k, *(a.aval.shape for a in eqn.invars), **eqn.params)
    return k.finish()


def _batch_size(shape):
    return math.prod(shape[:-2])


def _cholesky(k, shape):
    """?potrf('L') per matrix; the strict upper triangle zeroed (as SciPy's wrapper
    does with clean=1); NaN where info != 0."""
    n, b = shape[-1], k.b
    a, info, size = k.buffer(n * n), k.slot(k.i32), n * n

    def matrix(e):
        offset = b.mul(e, k.const(size))
        k.to_columns(k.ins[0], offset, n, n, a, n)
        k.call("potrf", [k.char("L"), k.integer(n), a, k.integer(n), info])
        k.if_else(info, lambda: k.fill_nan(k.outs[0], offset, size),
                  lambda: k.from_columns(a, n, n, n, k.outs[0], offset,
                                         keep=lambda i, j: b.icmp_signed("<=", j, i)))
    k.batch(_batch_size(shape), matrix)


def _triangular_solve(k, a_shape, b_shape, *, left_side, lower, transpose_a, conjugate_a,
                      unit_diagonal):
    """BLAS ?trsm with alpha = 1 per pair of matrices, as the impl calls it: on the
    row-major a and b read column-major (a.T and b.T), the transposed system, with
    the other side and the other triangle; op(a) is a, a.T or (complex with
    conjugate_a) a^H by the trans flag, or conj(a) by a conjugated copy of a (a
    real matrix: conjugate_a changes nothing). b is copied into the output, which
    trsm overwrites with x: no transposing copies."""
    n, (m, cols), b = a_shape[-1], b_shape[-2:], k.b
    alpha = k.slot(k.elem, k.scalar(1.0))
    conjugate = conjugate_a and k.complex
    trans = ("C" if conjugate else "T") if transpose_a else "N"
    flags = [k.char("R" if left_side else "L"), k.char("U" if lower else "L"), k.char(trans),
             k.char("U" if unit_diagonal else "N")]
    conjugated = k.buffer(n * n) if conjugate and not transpose_a else None

    def pair(e):
        a_offset, offset = b.mul(e, k.const(n * n)), b.mul(e, k.const(m * cols))
        a = k.at(k.ins[0], a_offset)
        if conjugated is not None:
            k.to_columns(k.ins[0], a_offset, 1, n * n, conjugated, 1, conjugate=True)
            a = conjugated
        k.copy(k.ins[1], offset, k.outs[0], offset, m * cols)
        k.call("trsm", flags + [k.integer(cols), k.integer(m), alpha, a, k.integer(n),
                                k.at(k.outs[0], offset), k.integer(cols)])
    k.batch(_batch_size(b_shape), pair)


def _lu(k, shape):
    """?getrf per matrix (info > 0, a singular matrix, still factors); pivots made
    0-based, and the permutation they apply to 0..m-1."""
    (m, n), b = shape[-2:], k.b
    steps = min(m, n)
    a, ipiv, info = k.buffer(m * n), k.buffer(steps, 4), k.slot(k.i32)
    lu, pivots, permutation = k.outs

    def matrix(e):
        k.to_columns(k.ins[0], b.mul(e, k.const(m * n)), m, n, a, m)
        k.call("getrf", [k.integer(m), k.integer(n), a, k.integer(m), ipiv, info])
        k.from_columns(a, m, m, n, lu, b.mul(e, k.const(m * n)))
        rows = b.mul(e, k.const(m))
        k.loop(m, lambda t: b.store(b.trunc(t, k.i32), k.at(permutation, b.add(rows, t), k.i32)),
               "t")

        def swap(t):
            j = b.sub(b.load(k.at(ipiv, t, k.i32), typ=k.i32), k.ir.Constant(k.i32, 1))
            b.store(j, k.at(pivots, b.add(b.mul(e, k.const(steps)), t), k.i32))
            p, q = k.at(permutation, b.add(rows, t), k.i32), \
                k.at(permutation, b.add(rows, b.sext(j, k.i64)), k.i32)
            pv, qv = b.load(p, typ=k.i32), b.load(q, typ=k.i32)
            b.store(qv, p)
            b.store(pv, q)
        k.loop(steps, swap, "t")
    k.batch(_batch_size(shape), matrix)


def _inv(k, shape):
    """?getrf then ?getri per matrix, in place in the output, as the impl calls them:
    on a copy of the row-major matrix read column-major (a.T), whose inverse read
    back row-major is a's, so nothing is transposed. The workspace from ?getri's
    query; its info != 0 (singular) gives NaN."""
    n, b = shape[-1], k.b
    ipiv, info, probe = k.buffer(n, 4), k.slot(k.i32), k.slot(k.elem)
    (lwork,) = k.workspace("getri", [k.integer(n), k.outs[0], k.integer(n), ipiv, probe,
                                     k.integer(-1), info], [(probe, "real")])
    work = k.buffer(lwork)

    def matrix(e):
        offset = b.mul(e, k.const(n * n))
        x = k.at(k.outs[0], offset)
        k.copy(k.ins[0], offset, k.outs[0], offset, n * n)
        k.call("getrf", [k.integer(n), k.integer(n), x, k.integer(n), ipiv, info])
        k.call("getri", [k.integer(n), x, k.integer(n), ipiv, work, k.integer(lwork), info])
        k.if_else(info, lambda: k.fill_nan(k.outs[0], offset, n * n), lambda: None)
    k.batch(_batch_size(shape), matrix)


def _qr(k, shape, *, full_matrices):
    """?geqrf, then ?orgqr (?ungqr) on a copy of the reflectors (columns past
    min(n, cols) zero, as the impl passes them); r is the upper triangle of
    geqrf's first rows. Workspace sizes from both routines' queries."""
    (m, n), b = shape[-2:], k.b
    steps = min(m, n)
    cols = m if full_matrices else steps
    kept = min(n, cols)
    form_q = _calls("qr", k.complex)[1]
    a, tau, q_buf, info = k.buffer(m * n), k.buffer(steps), k.buffer(m * cols), k.slot(k.i32)
    probe, minus_one = k.slot(k.elem), k.integer(-1)
    (lwork_qr,) = k.workspace("geqrf", [k.integer(m), k.integer(n), a, k.integer(m), tau, probe,
                                        minus_one, info], [(probe, "real")])
    (lwork_q,) = k.workspace(form_q, [k.integer(m), k.integer(cols), k.integer(steps), q_buf,
                                      k.integer(m), tau, probe, minus_one, info],
                             [(probe, "real")])
    bigger = b.select(b.icmp_signed(">", lwork_qr, lwork_q), lwork_qr, lwork_q)
    work = k.buffer(bigger)
    q, r = k.outs
    zero = k.scalar(0.0)

    def matrix(e):
        k.to_columns(k.ins[0], b.mul(e, k.const(m * n)), m, n, a, m)
        k.call("geqrf", [k.integer(m), k.integer(n), a, k.integer(m), tau, work,
                         k.integer(lwork_qr), info])
        k.from_columns(a, m, cols, n, r, b.mul(e, k.const(cols * n)),
                       keep=lambda i, j: b.icmp_signed(">=", j, i))
        k.copy(a, k.const(0), q_buf, k.const(0), m * kept)
        k.loop(m * (cols - kept), lambda t: b.store(zero, k.at(q_buf, b.add(t, k.const(m * kept)))),
               "t")
        k.call(form_q, [k.integer(m), k.integer(cols), k.integer(steps), q_buf, k.integer(m),
                        tau, work, k.integer(lwork_q), info])
        k.from_columns(q_buf, m, m, cols, q, b.mul(e, k.const(m * cols)))
    k.batch(_batch_size(shape), matrix)


def _eigh(k, shape, *, lower):
    """?syevd ('V'; ?heevd for complex, with its real workspace) per matrix with
    the queried workspaces; NaN where the triangle it reads holds an inf or NaN
    (LAPACK is not called) or info != 0."""
    n, b = shape[-1], k.b
    routine = _calls("eigh", k.complex)[0]
    a, w_buf, info = k.buffer(n * n), k.buffer(n, k.real_size), k.slot(k.i32)
    probe, rprobe, iprobe = k.slot(k.elem), k.slot(k.real), k.slot(k.i32)
    minus_one = k.integer(-1)
    head = [k.char("V"), k.char("L" if lower else "U"), k.integer(n), a, k.integer(n), w_buf]
    if k.complex:   # work, lwork, rwork, lrwork, iwork, liwork
        query = [probe, minus_one, rprobe, minus_one, iprobe, minus_one]
        lwork, lrwork, liwork = k.workspace(routine, head + query + [info],
                                            [(probe, "real"), (rprobe, "real"), (iprobe, "int")])
        work, rwork, iwork = k.buffer(lwork), k.buffer(lrwork, k.real_size), k.buffer(liwork, 4)
        tail = [work, k.integer(lwork), rwork, k.integer(lrwork), iwork, k.integer(liwork), info]
    else:           # work, lwork, iwork, liwork
        lwork, liwork = k.workspace(routine, head + [probe, minus_one, iprobe, minus_one, info],
                                    [(probe, "real"), (iprobe, "int")])
        work, iwork = k.buffer(lwork), k.buffer(liwork, 4)
        tail = [work, k.integer(lwork), iwork, k.integer(liwork), info]
    v, w = k.outs

    def matrix(e):
        offset = b.mul(e, k.const(n * n))

        def failed():
            k.fill_nan(v, offset, n * n)
            k.fill_nan(w, b.mul(e, k.const(n)), n, real=True)

        def succeeded():
            k.from_columns(a, n, n, n, v, offset)
            k.copy(w_buf, k.const(0), w, b.mul(e, k.const(n)), n, k.real)

        def decompose():
            k.to_columns(k.ins[0], offset, n, n, a, n)
            k.call(routine, head + tail)
            k.if_else(info, failed, succeeded)
        k.unless_finite(k.ins[0], offset, n * n, failed, decompose, triangle=(n, lower))
    k.batch(_batch_size(shape), matrix)


def _svd(k, shape, *, full_matrices, compute_uv):
    """?gesdd per matrix (jobz 'A', 'S' or 'N', leading dimensions as SciPy's
    wrapper passes them; complex: a real workspace of the size LAPACK documents)
    with the queried workspace; NaN where the matrix holds an inf or NaN (LAPACK
    is not called) or info != 0."""
    (m, n), b = shape[-2:], k.b
    steps, most = min(m, n), max(m, n)
    u_rows, u_cols = (m, m if full_matrices else steps) if compute_uv else (1, 1)
    vt_rows, vt_cols = (n if full_matrices else steps, n) if compute_uv else (1, 1)
    jobz = ("A" if full_matrices else "S") if compute_uv else "N"
    a, s_buf = k.buffer(m * n), k.buffer(steps, k.real_size)
    u_buf, vt_buf = k.buffer(u_rows * u_cols), k.buffer(vt_rows * vt_cols)
    iwork, info = k.buffer(8 * steps, 4), k.slot(k.i32)
    rwork = []
    if k.complex:
        size = max(7 * steps, 5 * steps * steps + 5 * steps,
                   2 * most * steps + 2 * steps * steps + steps)
        rwork = [k.buffer(size, k.real_size)]
    head = [k.char(jobz), k.integer(m), k.integer(n), a, k.integer(m), s_buf, u_buf,
            k.integer(u_rows), vt_buf, k.integer(vt_rows)]
    probe = k.slot(k.elem)
    (lwork,) = k.workspace("gesdd", head + [probe, k.integer(-1)] + rwork + [iwork, info],
                           [(probe, "real")])
    work = k.buffer(lwork)

    def matrix(e):
        parts = [(k.outs[0], steps, True)]
        if compute_uv:
            parts += [(k.outs[1], u_rows * u_cols, False), (k.outs[2], vt_rows * vt_cols, False)]

        def failed():
            for out, size, real in parts:
                k.fill_nan(out, b.mul(e, k.const(size)), size, real=real)

        def succeeded():
            k.copy(s_buf, k.const(0), k.outs[0], b.mul(e, k.const(steps)), steps, k.real)
            if compute_uv:
                k.from_columns(u_buf, u_rows, m, u_cols, k.outs[1],
                               b.mul(e, k.const(m * u_cols)))
                k.from_columns(vt_buf, vt_rows, vt_rows, n, k.outs[2],
                               b.mul(e, k.const(vt_rows * n)))

        def decompose():
            k.to_columns(k.ins[0], b.mul(e, k.const(m * n)), m, n, a, m)
            k.call("gesdd", head + [work, k.integer(lwork)] + rwork + [iwork, info])
            k.if_else(info, failed, succeeded)
        k.unless_finite(k.ins[0], b.mul(e, k.const(m * n)), m * n, failed, decompose)
    k.batch(_batch_size(shape), matrix)


def _eig(k, shape, *, compute_left_eigenvectors, compute_right_eigenvectors):
    """?geev per matrix with the queried workspace; a matrix with an inf or NaN, or
    info != 0, gives NaN + 0j outputs. For a real matrix the complex results are
    built as the impl builds them with NumPy: w = wr + 1j*wi, and for a conjugate
    pair (wi[j] > 0) columns v[:, j] + 1j*v[:, j+1] and v[:, j] - 1j*v[:, j+1],
    with NumPy's operations (1j*x = (0*x - 1*0, 0*0 + 1*x), then a complex add or
    subtract), so signs of zeros agree too."""
    n, b, ir = shape[-1], k.b, k.ir
    left, right = compute_left_eigenvectors, compute_right_eigenvectors
    pair = ir.ArrayType(k.real, 2)
    ld_l, ld_r = (n if left else 1), (n if right else 1)
    a, info = k.buffer(n * n), k.slot(k.i32)
    vl_buf, vr_buf = k.buffer(ld_l * n), k.buffer(ld_r * n)
    if k.complex:
        w_bufs, extra = [k.buffer(n)], [k.buffer(2 * n, k.real_size)]      # w; rwork
    else:
        w_bufs, extra = [k.buffer(n), k.buffer(n)], []                       # wr, wi
    head = [k.char("V" if left else "N"), k.char("V" if right else "N"), k.integer(n), a,
            k.integer(n)] + w_bufs + [vl_buf, k.integer(ld_l), vr_buf, k.integer(ld_r)]
    probe = k.slot(k.elem)
    (lwork,) = k.workspace("geev", head + [probe, k.integer(-1)] + extra + [info],
                           [(probe, "real")])
    work = k.buffer(lwork)
    outs = list(k.outs)
    vectors = [buf for buf, asked in ((vl_buf, left), (vr_buf, right)) if asked]
    real_nan = ir.Constant(k.real, float("nan"))
    nan = ir.Constant(pair, [real_nan, ir.Constant(k.real, 0.0)])
    zero, one = ir.Constant(k.real, 0.0), ir.Constant(k.real, 1.0)

    def fill(e):
        for out, size in zip(outs, [n] + [n * n] * len(vectors)):
            k.loop(size, lambda t, out=out, size=size: b.store(nan, k.at(out, b.add(
                b.mul(e, k.const(size)), t), pair)), "t")

    def times_i(x):
        """(re, im) of 1j * x as NumPy multiplies."""
        return (b.fsub(b.fmul(zero, x), b.fmul(one, zero)),
                b.fadd(b.fmul(zero, zero), b.fmul(one, x)))

    def complex_of(v, x, subtract=False):
        re, im = times_i(x)
        op = b.fsub if subtract else b.fadd
        value = b.insert_value(ir.Constant(pair, ir.Undefined), op(v, re), 0)
        return b.insert_value(value, op(zero, im), 1)

    def real_results(e):
        wr, wi = w_bufs

        def eigenvalue(j):
            x = complex_of(b.load(k.at(wr, j), typ=k.real), b.load(k.at(wi, j), typ=k.real))
            b.store(x, k.at(outs[0], b.add(b.mul(e, k.const(n)), j), pair))
        k.loop(n, eigenvalue, "j")
        for out, v in zip(outs[1:], vectors):
            base = b.mul(e, k.const(n * n))

            def at(r, c, out=out):
                return k.at(out, b.add(base, b.add(b.mul(r, k.const(n)), c)), pair)

            def plain(r, c, out=out, v=v):
                x = b.load(k.at(v, b.add(r, b.mul(c, k.const(n)))), typ=k.real)
                value = b.insert_value(ir.Constant(pair, ir.Undefined), x, 0)
                b.store(b.insert_value(value, zero, 1), at(r, c))
            k.loop(n, lambda r: k.loop(n, lambda c: plain(r, c), "c"), "r")

            def conjugate_pair(j, v=v):
                positive = b.fcmp_ordered(">", b.load(k.at(wi, j), typ=k.real), zero)
                with b.if_then(b.and_(positive, b.icmp_signed("<", j, k.const(n - 1)))):
                    def row(r):
                        x = b.load(k.at(v, b.add(r, b.mul(j, k.const(n)))), typ=k.real)
                        y = b.load(k.at(v, b.add(r, b.mul(b.add(j, k.const(1)), k.const(n)))),
                                   typ=k.real)
                        b.store(complex_of(x, y), at(r, j))
                        b.store(complex_of(x, y, subtract=True), at(r, b.add(j, k.const(1))))
                    k.loop(n, row, "r")
            k.loop(n, conjugate_pair, "j")

    def complex_results(e):
        k.copy(w_bufs[0], k.const(0), outs[0], b.mul(e, k.const(n)), n)
        for out, v in zip(outs[1:], vectors):
            k.from_columns(v, n, n, n, out, b.mul(e, k.const(n * n)))

    def matrix(e):
        offset = b.mul(e, k.const(n * n))

        def decompose():
            k.to_columns(k.ins[0], offset, n, n, a, n)
            k.call("geev", head + [work, k.integer(lwork)] + extra + [info])
            k.if_else(info, lambda: fill(e),
                      lambda: (complex_results if k.complex else real_results)(e))
        k.unless_finite(k.ins[0], offset, n * n, lambda: fill(e), decompose)
    k.batch(_batch_size(shape), matrix)


_EMITTERS = {"cholesky": _cholesky, "triangular_solve": _triangular_solve, "lu": _lu,
             "inv": _inv,
             "qr": _qr, "eigh": _eigh, "svd": _svd, "eig": _eig}
