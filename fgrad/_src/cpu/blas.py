"""dot_general as native calls of BLAS gemm (the CPU backend's matmul kernels).

fgrad uses one BLAS in a process: the OpenBLAS that NumPy's wheel bundles
(`numpy.libs/libscipy_openblas64_*.so`), found with dlopen(RTLD_NOLOAD) so
its already-loaded copy is reused and made global; compiled code calls its
CBLAS `sgemm`/`dgemm`/`gemv` (64-bit integer interface) by their own names.
Two OpenBLAS copies in one process fight over threads (see the project's
cpu-codegen notes), so when NumPy's copy cannot be found no native matmul is
emitted and dot_general stays a NumPy step (announced as such in `as_text`).

Small products (gemms of fewer than `SMALL_GEMM` multiply-adds each) run
with OpenBLAS limited to the calling thread for the call: they gain nothing
from its worker threads, and on a busy machine waiting for a descheduled
worker made them 10-100x slower (the thread count is restored right after).
In a segment shared with fgrad's own workers (`program.Parallel`, OpenBLAS
on one thread meanwhile) products are split by the rows of their matrix, or
their batch elements (`split_extent`), so that one pool of threads owns the
cores and the element-wise kernels around them are shared too: a
transformer's training step ran about 3x faster that way than with OpenBLAS's
threads on a busy 2-core machine. For most shapes the parts, each a gemm on
one thread, give the bits of one call on OpenBLAS's threads (NumPy's), but
OpenBLAS's threads cut some shapes' columns and sums into other blocks than
its one thread does (`splits_exactly`): such a gemm always runs as the parts
the workers would split it into, each on one thread, jit and eager alike
(`parts_of`; eager `matmul`), whether fgrad's threads share them or one
thread runs them in turn.

On a host with AVX-512 a float product whose result rows are a whole number of
vectors wide is not OpenBLAS's but fgrad's lane product (`lane_rows`,
`lane_product`), jit and eager alike: it ran ResMLP's 128x256 @ 256x256
twice as fast as NumPy's OpenBLAS on one thread of the development machine,
and its bits (one fused multiply-add chain per element) depend on neither
how rows are cut nor the operands' layout, so such products split over the
workers by rows at any size and are never cut into `parts_of`.

`gemm_spec(eqn)` maps a float32/float64 dot_general (complex64/complex128:
cgemm/zgemm and cgemv/zgemv, alpha and beta by pointer) onto one gemm (gemv when
one side is a vector) per batch element when its layout allows it without
copies: each operand's non-batch dims either (free, contracting) or
(contracting, free) in order (a transposed operand is a gemm transpose flag),
its batch dims leading or else between adjacent groups of those, before its
last dim (a matrix per batch element whose rows are lda apart: attention's
heads read in place from (batch, length, heads, features)), no
preferred_element_type, no zero-size dims. One rhs matrix broadcast over the
batch (x @ w for x of shape (..., M, K)) makes one gemm of all the lhs rows.
`transposed_output` writes a batched product's result transposed in place (C's
rows ldc apart). `emit_dot` writes

    i1 fname_body(ptr lhs, ptr rhs, ptr out, i64 lo, i64 hi)

(the same signature as a fused group's body, so the same caller drives both)
which calls gemm with alpha = 1, beta = 0 for each batch element in [lo, hi)
(flattened), or without batch dims on the rows [lo, hi) of the stored matrix:
fgrad's workers share a batch of small products (attention's per-head
products) element by element, each gemm on one thread.
"""
import contextlib
import ctypes
import functools
import glob
import math
import os
import threading
from typing import NamedTuple

import numpy as np

from . import loops, threads

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
# NumPy's OpenBLAS symbols, called by these names (the library is made global,
# so a compiled object loaded with dlopen resolves them as MCJIT does)
_SYMBOLS = {np.dtype(np.float32): "scipy_cblas_sgemm64_",
            np.dtype(np.float64): "scipy_cblas_dgemm64_"}
_GEMV = {np.dtype(np.float32): "scipy_cblas_sgemv64_",
         np.dtype(np.float64): "scipy_cblas_dgemv64_"}
_GET_THREADS, _SET_THREADS = "scipy_openblas_get_num_threads64_", \
    "scipy_openblas_set_num_threads64_"
# complex products: the same calls with alpha and beta passed by pointer
_COMPLEX_GEMM = {np.dtype(np.complex64): "scipy_cblas_cgemm64_",
                 np.dtype(np.complex128): "scipy_cblas_zgemm64_"}
_COMPLEX_GEMV = {np.dtype(np.complex64): "scipy_cblas_cgemv64_",
                 np.dtype(np.complex128): "scipy_cblas_zgemv64_"}
_registered = None
_complex_registered = None

SMALL_GEMM = 1 << 22
PROBE_GEMM = 1 << 29     # products splits_exactly tries, up to ~5 ms each


def _numpy_openblas():
    """NumPy's already-loaded OpenBLAS, or None."""
    libs = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for path in glob.glob(os.path.join(libs, "libscipy_openblas64_*.so")):
        try:
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL | getattr(os, "RTLD_NOLOAD", 4))
        except OSError:
            continue
    return None


_gemm_calls = {}


def _calls(dtype):
    """(gemm, (get thread count, set thread count)) of NumPy's OpenBLAS by ctypes."""
    if dtype not in _gemm_calls:
        lib = _numpy_openblas()
        real = ctypes.c_float if dtype == np.float32 else ctypes.c_double
        i64, p = ctypes.c_int64, ctypes.c_void_p
        fn = getattr(lib, _SYMBOLS[dtype])
        fn.argtypes = [ctypes.c_int] * 3 + [i64] * 3 + [real, p, i64, p, i64, real, p, i64]
        fn.restype = None
        threads = getattr(lib, _GET_THREADS), getattr(lib, _SET_THREADS)
        threads[1].argtypes = [ctypes.c_int]
        _gemm_calls[dtype] = fn, threads
    return _gemm_calls[dtype]


def gemm_from_python(a, b, trans_b=False):
    """a @ b (a @ b.T when trans_b) for float32/float64 matrices, by the gemm native
    kernels call, on the calling thread as they run it: BLAS's bits depend on the
    product's shape and on how its threads split it, so an impl that must give a
    kernel's bits calls this (NumPy's matmul takes gemv for a single row or column,
    and OpenBLAS's threads). Requires available()."""
    fn, _ = _calls(a.dtype)
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b, a.dtype)
    (m, k), n = a.shape, b.shape[0] if trans_b else b.shape[1]
    out = np.empty((m, n), a.dtype)
    with _one_thread(a.dtype):
        fn(_ROW_MAJOR, _NO_TRANS, _TRANS if trans_b else _NO_TRANS, m, n, k, 1.0,
           a.ctypes.data, k, b.ctypes.data, k if trans_b else n, 0.0, out.ctypes.data, n)
    return out


_pinned = [0, 1]              # Python threads pinning OpenBLAS to one thread, count before
_pin_lock = threading.Lock()


@contextlib.contextmanager
def _one_thread(dtype):
    """OpenBLAS on one thread meanwhile; the count before is put back when the
    last Python thread pinning it is done (native code pins it for itself)."""
    _, (get, set_) = _calls(np.dtype(dtype))
    with _pin_lock:
        if not _pinned[0]:
            _pinned[1] = get()
            set_(1)
        _pinned[0] += 1
    try:
        yield
    finally:
        with _pin_lock:
            _pinned[0] -= 1
            if not _pinned[0]:
                set_(_pinned[1])


_exact = {}


def splits_exactly(dtype, m, n, k, parts):
    """Whether a float m x k by k x n gemm's rows cut into `parts` ranges as the
    worker pool cuts them (range c: rows c*m//parts to (c+1)*m//parts), each a
    gemm on one thread, give the bits of one gemm on OpenBLAS's threads (as
    NumPy calls it). They need not: OpenBLAS's threads cut the columns and the
    terms of each sum into blocks of other sizes for some shapes (k = 600 or 784
    in float32, n = 300 in float64 with NumPy's OpenBLAS on an AVX-512 Xeon),
    which changes the last bits. Found once per shape and dtype by running both
    on random matrices, where other blocks round otherwise for almost every
    element (transposed operands give the same bits)."""
    key = (np.dtype(dtype), m, n, k, parts)
    if key not in _exact:
        rng = np.random.default_rng(m * n + k)
        a, b = (rng.random(shape, dtype) - 0.5 for shape in ((m, k), (k, n)))
        _exact[key] = bool(np.array_equal(_in_parts(a, b, parts), np.matmul(a, b)))
    return _exact[key]


def lane_rows(dtype, n):
    """Whether a float gemm whose result rows are n wide is fgrad's lane product
    (`lane_product`, jit and eager alike) rather than OpenBLAS's: float32/float64
    rows a whole number of vectors wide, on a host with AVX-512. There its
    register tiles ran 128x256 @ 256x256 in float32 1.9x faster than NumPy's
    OpenBLAS on one thread (whose Haswell kernels DYNAMIC_ARCH picks on the AMD
    EPYC development machine), and its bits are one fused multiply-add chain
    per element in the order of the sum: they depend on neither the product's
    rows, nor how threads cut them, nor the operands' layout."""
    dt = np.dtype(dtype)
    return dt in _SYMBOLS and n % _lanes(dt) == 0 and _avx512()


def lane_dtypes(jaxpr):
    """The dtypes of `jaxpr`'s products (nested ones too) that are lane products
    (see lane_rows), whose kernel a program compiles ahead (`fused.prefetch_runtime`)."""
    from ..jaxpr import all_eqns
    out = set()
    for eqn in all_eqns(jaxpr):
        if eqn.primitive.name == "dot_general":
            (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
            lhs, rhs = (a.aval.shape for a in eqn.invars)
            m = math.prod(d for i, d in enumerate(lhs) if i not in lc and i not in lb)
            n = math.prod(d for i, d in enumerate(rhs) if i not in rc and i not in rb)
            if min(m, n) >= 2 and lane_rows(eqn.outvars[0].aval.dtype, n):
                out.add(eqn.outvars[0].aval.dtype)
    return out


@functools.lru_cache(maxsize=None)
def _avx512():
    from . import engine
    return engine.host_has_feature("avx512f")


def _lanes(dt):
    from . import lane_product
    return lane_product.LANES[dt]


def parts_of(dtype, m, n, k, batched):
    """How many row ranges of the pool's cut (see splits_exactly) a gemm of a
    float product runs as, each on one thread, jit and eager alike: 0 where one
    call on OpenBLAS's threads gives the bits its split does (and for products
    over PROBE_GEMM multiply-adds, never split: not tried; and for lane
    products, see lane_rows), else the threads a
    split kernel may use (1 for an element of a batch, split by elements)."""
    if np.dtype(dtype) not in _SYMBOLS or min(m, n) < 2 or not 0 < m * n * k <= PROBE_GEMM \
            or lane_rows(dtype, n):
        return 0
    parts = 1 if batched else threads.split_threads()
    return 0 if splits_exactly(dtype, m, n, k, parts) else parts


def whole_gives_split_bits(spec, dtype):
    """Whether the body of a product without batch dims (see emit_dot), run on
    one thread over all its rows, gives the bits of its rows split over the
    workers: where `parts_of` cuts it, the body runs the same parts in turn;
    elsewhere one gemm of all the rows must give NumPy's bits (found once per
    shape, as splits_exactly finds them)."""
    m, n, k = spec.m, spec.n, spec.k
    return lane_rows(dtype, n) or bool(parts_of(dtype, m, n, k, False)) or (
        np.dtype(dtype) in _SYMBOLS and 0 < m * n * k <= PROBE_GEMM
        and splits_exactly(dtype, m, n, k, 1))


def matmul(a, b):
    """np.matmul(a, b) of float arrays a (..., M, K) and b (..., K, N) with the
    native kernels' bits: in parts where `parts_of` says so."""
    (m, k), n = a.shape[-2:], b.shape[-1]
    batched = a.ndim > 2 or b.ndim > 2
    usable = a.dtype == b.dtype and a.ndim >= 2 and b.ndim >= 2 and _found()
    lanes = usable and min(m, n) >= 2 and k > 0 and lane_rows(a.dtype, n)
    parts = parts_of(a.dtype, m, n, k, batched) if usable and not lanes else 0
    if not parts and not lanes:
        return np.matmul(a, b)
    if not batched:
        return _lane_product(a, b) if lanes else _in_parts(a, b, parts)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    pairs = zip(np.broadcast_to(a, batch + (m, k)).reshape(-1, m, k),
                np.broadcast_to(b, batch + (k, n)).reshape(-1, k, n))
    each = _lane_product if lanes else gemm_from_python
    return np.stack([each(x, y) for x, y in pairs]).reshape(batch + (m, n))


def _lane_product(a, b):
    """a @ b for float matrices by `lane_product` (see lane_rows), a read in
    place; a product of SMALL_GEMM multiply-adds or more shares its rows with
    Python threads (the calls release the GIL), as the workers would: the bits
    are the same however the rows are cut."""
    from . import lane_product
    fn, item = lane_product.function(a.dtype), a.itemsize
    if any(st <= 0 or st % item for st in a.strides):
        a = np.ascontiguousarray(a)
    b = np.ascontiguousarray(b, a.dtype)
    (m, k), n = a.shape, b.shape[1]
    out = np.zeros((m, n), a.dtype)
    sa_m, sa_r = a.strides[0] // item, a.strides[1] // item
    parts = threads.split_threads() if m * n * k >= SMALL_GEMM else 1

    def rows(c):
        lo, hi = c * m // parts, (c + 1) * m // parts
        if hi > lo:
            fn(a.ctypes.data + lo * sa_m * item, sa_m, sa_r, 0, b.ctypes.data, n, 0,
               out.ctypes.data + lo * n * item, n, hi - lo, n, k, 1)

    helpers = [threading.Thread(target=rows, args=(c,)) for c in range(1, parts)]
    for t in helpers:
        t.start()
    rows(0)
    for t in helpers:
        t.join()
    return out


def _in_parts(a, b, parts):
    """a @ b as the pool's row ranges, each a gemm on one thread; a product of
    SMALL_GEMM multiply-adds or more shares them with Python threads (the calls
    release the GIL), as the workers would."""
    fn, _ = _calls(a.dtype)
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b, a.dtype)
    (m, k), n = a.shape, b.shape[1]
    out = np.empty((m, n), a.dtype)

    def rows(c):
        lo, hi = c * m // parts, (c + 1) * m // parts
        if hi > lo:
            fn(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, hi - lo, n, k, 1.0,
               a.ctypes.data + lo * k * a.itemsize, k, b.ctypes.data, n, 0.0,
               out.ctypes.data + lo * n * out.itemsize, n)

    helpers = []
    with _one_thread(a.dtype):
        if m * n * k >= SMALL_GEMM:
            helpers = [threading.Thread(target=rows, args=(c,)) for c in range(1, parts)]
            for t in helpers:
                t.start()
        for c in [0] if helpers else range(parts):
            rows(c)
        for t in helpers:
            t.join()
    return out


@functools.lru_cache(maxsize=None)
def _found():
    """Whether NumPy's OpenBLAS was found (looked up once)."""
    return _numpy_openblas() is not None


def available():
    """Whether gemm can be called from native code (registers the symbols once)."""
    global _registered
    if _registered is None:
        lib = _numpy_openblas()
        _registered = False
        if lib is not None:
            try:
                addresses = {name: ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
                             for name in [*_SYMBOLS.values(), *_GEMV.values(), _GET_THREADS,
                                          _SET_THREADS]}
            except AttributeError:
                addresses = None
            if addresses:
                from . import engine
                for name, address in addresses.items():
                    engine.add_symbol(name, address)
                _registered = True
    return _registered


def complex_available():
    """Whether the complex gemm/gemv can be called too (registered once)."""
    global _complex_registered
    if _complex_registered is None:
        _complex_registered = False
        lib = _numpy_openblas() if available() else None
        if lib is not None:
            try:
                addresses = {name: ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
                             for name in [*_COMPLEX_GEMM.values(), *_COMPLEX_GEMV.values()]}
            except AttributeError:
                return False
            from . import engine
            for name, address in addresses.items():
                engine.add_symbol(name, address)
            _complex_registered = True
    return _complex_registered


class GemmSpec(NamedTuple):
    """One gemm per batch element: C[M,N] = op(A)[M,K] @ op(B)[K,N], row-major, A's
    rows lda elements apart, B's ldb and C's ldc (out_batch_strides: C's per batch
    dim; see transposed_output)."""
    batch: tuple          # batch extents
    lhs_batch_strides: tuple   # element strides per batch dim (0 where broadcast)
    rhs_batch_strides: tuple
    m: int
    n: int
    k: int
    trans_a: bool
    trans_b: bool
    lda: int
    ldb: int
    ldc: int
    out_batch_strides: tuple


class _Layout(NamedTuple):
    """An operand as a matrix per batch element (see _operand_layout)."""
    free: int             # free extent
    contracting: int      # contracting extent
    contracting_first: bool   # stored (contracting, free)
    ld: int               # elements between the stored matrix's rows
    batch_strides: tuple  # element strides of the batch dims (0 where extent 1)


def _operand_layout(shape, batch, contracting):
    """The operand's _Layout when its non-batch dims are (free..., contracting...) or
    (contracting..., free...) in order, or None. With batch dims leading that is a
    contiguous matrix per batch element; otherwise (attention's heads in the middle,
    (batch, length, heads, features)) each group must be adjacent dims, the last
    dim not a batch dim, and both extents over 1: rows of a matrix lda apart that
    gemm reads in place, so the operand need not be copied."""
    ndim = len(shape)
    rest = [d for d in range(ndim) if d not in batch]
    free = [d for d in rest if d not in contracting]
    contracting = list(contracting)
    if contracting != sorted(contracting):
        return None
    size_f = math.prod(shape[d] for d in free)
    size_c = math.prod(shape[d] for d in contracting)
    if rest == free + contracting:
        outer, first = free, False
    elif rest == contracting + free:
        outer, first = contracting, True
    else:
        return None
    strides = [math.prod(shape[d + 1:]) for d in range(ndim)]
    if list(batch) != list(range(len(batch))) and (
            min(size_f, size_c) < 2 or rest[-1] != ndim - 1
            or any(b - a != 1 for group in (free, contracting) for a, b in zip(group, group[1:]))):
        return None
    ld = strides[outer[-1]] if outer else max(size_f * size_c, 1)
    return _Layout(size_f, size_c, first, ld,
                   tuple(0 if shape[d] == 1 else strides[d] for d in batch))


def gemm_spec(eqn):
    """The GemmSpec of a dot_general equation, or None if gemm cannot run it as is."""
    if eqn.primitive.name != "dot_general" or eqn.params["preferred_element_type"] is not None:
        return None
    lhs, rhs = (a.aval for a in eqn.invars)
    if rhs.dtype != lhs.dtype or not (lhs.dtype.kind in "iu" or (lhs.dtype in _SYMBOLS
                                                                 and available())
                                      or (lhs.dtype in _COMPLEX_GEMM and complex_available())):
        return None
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    nb = len(lb)
    left = _operand_layout(lhs.shape, lb, lc)
    right = _operand_layout(rhs.shape, rb, rc)
    out_shape = eqn.outvars[0].aval.shape
    if left is None or right is None or 0 in out_shape or 0 in lhs.shape or 0 in rhs.shape:
        return None
    m, k, trans_a = left.free, left.contracting, left.contracting_first  # (K, M): transposed
    n, rhs_k_first = right.free, right.contracting_first                 # (N, K): transposed
    batch = tuple(out_shape[:nb])
    if nb and not trans_a and not any(right.batch_strides) and tuple(lb) == tuple(range(nb)):
        # one rhs matrix for every batch element (x @ w for x of shape (..., M, K)):
        # the lhs matrices stored one after another are one matrix of batch * M rows
        return GemmSpec((), (), (), math.prod(batch) * m, n, k, False, not rhs_k_first,
                        left.ld, right.ld, n, ())
    out_strides = tuple(math.prod(batch[d + 1:]) * m * n for d in range(nb))
    return GemmSpec(batch, left.batch_strides, right.batch_strides, m, n, k, trans_a,
                    not rhs_k_first, left.ld, right.ld, n, out_strides)


def transposed_output(eqn, permutation):
    """The GemmSpec of a batched dot_general that writes its result transposed by
    `permutation` in place (attention's heads merged back: (batch, heads, length,
    features) stored as (batch, length, heads, features)), or None: the output's
    rhs free dims must stay last and in order, its lhs free dims adjacent and in
    order, each group of extent 2 or more."""
    spec = gemm_spec(eqn)
    if spec is None or not spec.batch or min(spec.m, spec.n) < 2:
        return None
    (lc, rc), (lb, _) = eqn.params["dimension_numbers"]
    shape = eqn.outvars[0].aval.shape
    nb, ndim = len(lb), len(shape)
    n_free = len(eqn.invars[1].aval.shape) - nb - len(rc)
    where = [list(permutation).index(d) for d in range(ndim)]   # axis of each dim in the result
    rows, cols = where[nb:ndim - n_free], where[ndim - n_free:]
    if cols != list(range(ndim - n_free, ndim)) or \
            any(b - a != 1 for a, b in zip(rows, rows[1:])):
        return None
    moved = [shape[d] for d in permutation]
    strides = [math.prod(moved[a + 1:]) for a in range(ndim)]
    return spec._replace(ldc=strides[rows[-1]],
                         out_batch_strides=tuple(strides[where[d]] for d in range(nb)))


def emit_dot(ir, module, fname, eqn, spec):
    """Emit `fname_body` for a dot_general with its GemmSpec; returns the function.
    Integer products have no BLAS: they are loop nests (exact, wrapping like NumPy)."""
    dt = eqn.outvars[0].aval.dtype
    if dt.kind in "iu":
        return _emit_integer_dot(ir, module, fname, dt, spec)
    ptr, i32, i64 = ir.PointerType(), ir.IntType(32), ir.IntType(64)
    cplx = dt.kind == "c"
    real = ir.FloatType() if dt.itemsize == (8 if cplx else 4) else ir.DoubleType()
    elem = ir.ArrayType(real, 2) if cplx else real     # one element, for pointer shifts
    scalar = ptr if cplx else real                     # how alpha and beta are passed
    symbol = (_COMPLEX_GEMM if cplx else _SYMBOLS)[dt]
    gemm = module.globals.get(symbol)
    if gemm is None:
        gemm = ir.Function(module, ir.FunctionType(
            ir.VoidType(), [i32, i32, i32, i64, i64, i64, scalar, ptr, i64, ptr, i64, scalar,
                            ptr, i64]), symbol)
    body = ir.Function(module, ir.FunctionType(ir.IntType(1), [ptr, ptr, ptr, i64, i64]),
                       fname + "_body")
    body.linkage = "internal"
    body.attributes.add("alwaysinline")
    for a, name in zip(body.args, ("lhs", "rhs", "out", "lo", "hi")):
        a.name = name
    b = ir.IRBuilder(body.append_basic_block("entry"))
    lhs, rhs, out = body.args[:3]
    m, n, k = spec.m, spec.n, spec.k
    lda, ldb = spec.lda, spec.ldb

    gemv = loops.declare(ir, module, (_COMPLEX_GEMV if cplx else _GEMV)[dt], ir.VoidType(),
                         [i32, i32, i64, i64, scalar, ptr, i64, ptr, i64, scalar, ptr, i64])
    if cplx:     # 1 + 0i and 0 + 0i in memory
        one, zero = (b.alloca(elem, name=n) for n in ("one", "zero"))
        b.store(ir.Constant(elem, [ir.Constant(real, 1.0), ir.Constant(real, 0.0)]), one)
        b.store(ir.Constant(elem, [ir.Constant(real, 0.0), ir.Constant(real, 0.0)]), zero)
    else:
        one, zero = ir.Constant(real, 1.0), ir.Constant(real, 0.0)

    def const(v):
        return v if isinstance(v, ir.Value) else ir.Constant(i64, v)

    def matrix_vector(matrix, trans, rows, cols, ld, vector, c):
        """c = op(matrix) @ vector for a row-major (rows, cols) matrix (gemv is
        several times faster than gemm with one column)."""
        b.call(gemv, [ir.Constant(i32, _ROW_MAJOR),
                      ir.Constant(i32, _TRANS if trans else _NO_TRANS),
                      const(rows), const(cols), one,
                      matrix, const(max(ld, 1)), vector, const(1),
                      zero, c, const(1)])

    def shift(p, elements):
        return b.gep(p, [elements], inbounds=True, source_etype=elem)

    # [lo, hi) is a range of the rows of the stored matrix without batch dims, else
    # of the batch elements (see split_extent), so threads can share one product
    # (a complex product always runs whole: split_extent gives it no range)
    by_rows = not spec.batch and not cplx
    first = body.args[3] if by_rows else const(0)
    count = b.sub(body.args[4], first) if by_rows else None

    def call(offsets):
        lo, ro, oo = offsets
        a, bb, c = shift(lhs, lo), shift(rhs, ro), shift(out, oo)
        if n == 1:      # C[M] = op(A) @ b: A stored (M, K), or (K, M) when transposed
            rows = count or (k if spec.trans_a else m)
            if spec.trans_a:    # rows of A are terms of the sum: a partial product
                a, bb = shift(a, b.mul(first, const(lda))), shift(bb, first)
                matrix_vector(a, True, rows, m, lda, bb, c)
            else:
                a, c = shift(a, b.mul(first, const(lda))), shift(c, first)
                matrix_vector(a, False, rows, k, lda, bb, c)
            return
        if m == 1:      # C[N] = op(B)^T @ a: B stored (K, N), or (N, K) when transposed
            rows = count or (n if spec.trans_b else k)
            if spec.trans_b:
                bb, c = shift(bb, b.mul(first, const(ldb))), shift(c, first)
                matrix_vector(bb, False, rows, k, ldb, a, c)
            else:               # rows of B are terms of the sum: a partial product
                bb, a = shift(bb, b.mul(first, const(ldb))), shift(a, first)
                matrix_vector(bb, True, rows, n, ldb, a, c)
            return

        def gemm_rows(start, rows):
            if lanes:
                lane_rows_at(start, rows)
                return
            b.call(gemm, [ir.Constant(i32, _ROW_MAJOR),
                          ir.Constant(i32, _TRANS if spec.trans_a else _NO_TRANS),
                          ir.Constant(i32, _TRANS if spec.trans_b else _NO_TRANS),
                          const(rows), const(n), const(k),
                          one, shift(a, b.mul(start, const(1 if spec.trans_a else lda))),
                          const(max(lda, 1)), bb, const(max(ldb, 1)), zero,
                          shift(c, b.mul(start, const(spec.ldc))), const(max(spec.ldc, 1))])

        def lane_rows_at(start, rows):
            """c's rows [start, start + rows) = 0, then += the lane product's terms
            (b copied transposed first when it is stored (N, K))"""
            start, rows = const(start), const(rows)
            c0 = shift(c, b.mul(start, const(spec.ldc)))
            loops.upto(ir, b, body, const(0), rows, lambda i: loops.loop(
                ir, b, body, 0, n, lambda j: b.store(
                    zero, shift(c0, b.add(b.mul(i, const(spec.ldc)), j))), "zj"), "zi")
            rhs_rows, sb_r = bb, const(ldb)
            if spec.trans_b:
                rhs_rows, sb_r = b.call(malloc, [const(k * n * dt.itemsize)]), const(n)
                loops.loop(ir, b, body, 0, k, lambda r: loops.loop(
                    ir, b, body, 0, n, lambda j: b.store(
                        b.load(shift(bb, b.add(b.mul(j, const(ldb)), r)), typ=real),
                        shift(rhs_rows, b.add(b.mul(r, const(n)), j))), "tj"), "tr")
            sa_m, sa_r = (const(1), const(lda)) if spec.trans_a else (const(lda), const(1))
            b.call(lane, [shift(a, b.mul(start, const(1 if spec.trans_a else lda))),
                          sa_m, sa_r, const(0), rhs_rows, sb_r, const(0), c0,
                          const(spec.ldc), rows, const(n), const(k), const(1)])
            if spec.trans_b:
                b.call(free, [rhs_rows])

        if not (parts and by_rows):
            gemm_rows(first, count or m)
            return
        end = b.add(first, count)
        for part in range(parts):       # the rows of each part of `parts_of` in [lo, hi)
            start, stop = const(part * m // parts), const((part + 1) * m // parts)
            start = b.select(b.icmp_signed(">", first, start), first, start)
            stop = b.select(b.icmp_signed("<", end, stop), end, stop)
            with b.if_then(b.icmp_signed("<", start, stop)):
                gemm_rows(start, b.sub(stop, start))

    parts = parts_of(dt, m, n, k, bool(spec.batch))
    lanes = not cplx and min(m, n) >= 2 and lane_rows(dt, n)    # (not gemv's)
    if lanes:
        from . import lane_product
        lane = lane_product.declare(ir, module, dt)
        malloc = loops.declare(ir, module, "malloc", ptr, [i64])
        free = loops.declare(ir, module, "free", ir.VoidType(), [ptr])
    pinned = not lanes and (is_small(spec) or parts)
    restore = one_thread(ir, module, b) if pinned else (lambda: None)
    if spec.batch and not cplx:
        _batch_range(ir, b, body, spec, call, *body.args[3:5])
    else:
        _batches(ir, b, body, spec, call)
    restore()
    b.ret(ir.Constant(ir.IntType(1), 0))
    return body


SPLIT_ROWS, SPLIT_SUM = 1, 2


def split_extent(spec, dtype):
    """(extent, kind) of the body's [lo, hi) for a float product: with batch dims,
    the batch elements (flattened, SPLIT_ROWS); without, the rows of the stored
    matrix. For a matrix times a vector (or a
    vector times a matrix) that is the larger operand, whose rows are split the
    same way as an element-wise kernel over it (its update, say), so each
    thread keeps touching the same memory. kind SPLIT_ROWS: the range gives
    rows of the output; SPLIT_SUM: terms of the contraction, the body computes a
    partial product (the caller adds the parts). A gemm splits the rows of its
    output, except over PROBE_GEMM multiply-adds (see `parts_of`): (extent, 0),
    the body runs the whole product, as for integer and complex ones ((0, 0))."""
    if np.dtype(dtype).kind in "iuc":    # (complex: no partial products)
        return 0, 0
    small = spec.m * spec.n * spec.k <= PROBE_GEMM or (
        min(spec.m, spec.n) >= 2 and lane_rows(dtype, spec.n))     # lane products: any size
    if spec.batch:
        return math.prod(spec.batch), SPLIT_ROWS * small
    if spec.n == 1:
        return (spec.k, SPLIT_SUM) if spec.trans_a else (spec.m, SPLIT_ROWS)
    if spec.m == 1:
        return (spec.n, SPLIT_ROWS) if spec.trans_b else (spec.k, SPLIT_SUM)
    return spec.m, SPLIT_ROWS * small


def is_small(spec):
    """Whether each gemm of a product is too small for OpenBLAS's threads to pay
    (it runs on the calling thread)."""
    return spec.m * spec.n * spec.k < SMALL_GEMM


def thread_count(ir, module, b):
    """OpenBLAS's thread count now (an i32), at `b`."""
    return b.call(loops.declare(ir, module, _GET_THREADS, ir.IntType(32), []), [])


def set_thread_count(ir, module, b, count):
    """Set OpenBLAS's thread count to `count` (an i32) at `b`."""
    b.call(loops.declare(ir, module, _SET_THREADS, ir.VoidType(), [ir.IntType(32)]), [count])


def one_thread(ir, module, b):
    """Pin OpenBLAS to one thread at `b`; returns restore() that puts the
    caller's thread count back."""
    before = thread_count(ir, module, b)
    set_thread_count(ir, module, b, ir.Constant(ir.IntType(32), 1))
    return lambda: set_thread_count(ir, module, b, before)


def _emit_integer_dot(ir, module, fname, dt, spec):
    """C[b, i, j] = sum_p op(A)[b, i, p] * op(B)[b, p, j] in the integer type (sums of
    integers are exact modulo 2^bits in any order, so this equals NumPy's matmul)."""
    ptr, i64 = ir.PointerType(), ir.IntType(64)
    t = ir.IntType(8 * dt.itemsize)
    body = ir.Function(module, ir.FunctionType(ir.IntType(1), [ptr, ptr, ptr, i64, i64]),
                       fname + "_body")
    body.linkage = "internal"
    body.attributes.add("alwaysinline")
    b = ir.IRBuilder(body.append_basic_block("entry"))
    lhs, rhs, out = body.args[:3]
    m, n, k = spec.m, spec.n, spec.k
    lda, ldb = spec.lda, spec.ldb

    def const(v):
        return ir.Constant(i64, v)

    def element(ptr_, index):
        return b.load(b.gep(ptr_, [index], inbounds=True, source_etype=t), typ=t)

    def matrix(offsets):
        lo, ro, oo = offsets

        def row(i):
            def column(j):
                def term(p, acc):
                    a = element(lhs, b.add(lo, b.add(b.mul(p, const(lda)), i) if spec.trans_a
                                           else b.add(b.mul(i, const(lda)), p)))
                    c = element(rhs, b.add(ro, b.add(b.mul(j, const(ldb)), p) if spec.trans_b
                                           else b.add(b.mul(p, const(ldb)), j)))
                    return b.add(acc, b.mul(a, c))
                total = loops.fold(ir, b, body, k, term, ir.Constant(t, 0), "p")
                b.store(total, b.gep(out, [b.add(oo, b.add(b.mul(i, const(spec.ldc)), j))],
                                     inbounds=True, source_etype=t))
            loops.loop(ir, b, body, 0, n, column, "j")
        loops.loop(ir, b, body, 0, m, row, "i")

    _batches(ir, b, body, spec, matrix)
    b.ret(ir.Constant(ir.IntType(1), 0))
    return body


def _batch_range(ir, b, fn, spec, call, lo, hi):
    """call(offsets) (see _batches) for the batch elements lo..hi-1 in C order."""
    i64 = ir.IntType(64)
    strides = _offset_strides(spec)

    def element(t):
        index, rest = [], t
        for extent in reversed(spec.batch):
            index.append(b.urem(rest, ir.Constant(i64, extent)))
            rest = b.udiv(rest, ir.Constant(i64, extent))
        call([loops.linear(ir, b, index[::-1], st) for st in strides])
        return b.add(t, ir.Constant(i64, 1), flags=("nsw",))

    loops.stepping(ir, b, fn, lo, hi, element, "batch", signed=True)


def _batches(ir, b, fn, spec, call):
    """call(offsets) for each batch element of a GemmSpec: the element offsets of
    its lhs, rhs and output matrices (batch dims outermost, output C-ordered)."""
    strides = _offset_strides(spec)
    loops.nest(ir, b, fn, list(spec.batch),
               lambda idx: call([loops.linear(ir, b, idx, st) for st in strides]), "batch")


def _offset_strides(spec):
    """Element strides per batch dim of the lhs, rhs and output matrices."""
    return spec.lhs_batch_strides, spec.rhs_batch_strides, spec.out_batch_strides
