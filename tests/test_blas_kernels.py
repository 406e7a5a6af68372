"""dot_general as native BLAS gemm calls (fgrad/_src/cpu/blas.py) against the
reference interpreter, for every layout gemm takes without copies, and for the
other layouts, whose operands are first transposed by native copy loops
(fgrad/_src/compiler/dots.py)."""
import threading

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import jit, lax
from fgrad._src.cpu import blas, lane_product
from fgrad._src.jit.primitive import compile_jaxpr

pytestmark = pytest.mark.skipif(not blas.available(),
                                reason="NumPy's bundled OpenBLAS was not found")

# (lhs shape, rhs shape, dimension numbers, gemm takes the operands as they are)
CASES = [
    ((5, 7), (7, 3), (((1,), (0,)), ((), ())), True),                 # A @ B
    ((7, 5), (7, 3), (((0,), (0,)), ((), ())), True),                 # A^T @ B
    ((5, 7), (3, 7), (((1,), (1,)), ((), ())), True),                 # A @ B^T
    ((7, 5), (3, 7), (((0,), (1,)), ((), ())), True),                 # A^T @ B^T
    ((1, 7), (7, 9), (((1,), (0,)), ((), ())), True),                 # a row vector
    ((7,), (7, 4), (((0,), (0,)), ((), ())), True),                   # vector @ matrix
    ((6, 7), (7,), (((1,), (0,)), ((), ())), True),                   # matrix @ vector
    ((2, 3, 4, 5), (5, 6), (((3,), (0,)), ((), ())), True),           # free dims merge
    ((2, 3, 4, 5), (4, 5, 6), (((2, 3), (0, 1)), ((), ())), True),    # contracting dims merge
    ((4, 5, 7), (4, 7, 3), (((2,), (1,)), ((0,), (0,))), True),       # batched
    ((4, 5, 7), (1, 7, 3), (((2,), (1,)), ((0,), (0,))), True),       # broadcast batch
    ((2, 3, 5, 7), (2, 1, 3, 7), (((3,), (3,)), ((0, 1), (0, 1))), True),
    ((4, 5, 7), (7, 4, 3), (((2,), (0,)), ((0,), (1,))), True),       # batch not leading
    ((2, 5, 3, 4), (2, 5, 3, 6), (((1,), (1,)), ((0, 2), (0, 2))), True),  # heads in place
    ((5, 4, 2), (2, 4, 3), (((1,), (1,)), ((2,), (0,))), False),      # batch dim last
    ((5, 7, 2), (7, 3), (((1,), (0,)), ((), ())), False),             # contracting in middle
    ((2, 3, 4), (3, 2, 5), (((0, 1), (1, 0)), ((), ())), False),      # pairs cross over
]
RNG = np.random.default_rng(7)


def _labels(f, *args):
    exe = compile_jaxpr(jit(f).lower(*args).jaxpr, "f")
    return [k.label for k in exe.kernels]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("lshape,rshape,dims,native", CASES)
def test_dot_general_layouts(lshape, rshape, dims, native, dt):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(lshape).astype(dt)
    b = rng.standard_normal(rshape).astype(dt)
    f = lambda a, b: lax.dot_general(a, b, dims)  # noqa: E731
    got, want = jit(f)(a, b), f(a, b)
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = 1e-5 if dt == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    labels = _labels(f, a, b)
    if native:
        assert labels == ["native:dot_general"]
    else:             # one or two operands copied to a layout gemm takes, then gemm
        assert labels[-1] == "native:dot_general" and 2 <= len(labels) <= 3, labels
        assert set(labels[:-1]) == {"native:transpose"}, labels


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int32, np.uint32, np.int64])
@pytest.mark.parametrize("lshape,rshape,dims,native", CASES)
def test_integer_dots_are_native_loops(lshape, rshape, dims, native, dt):
    rng = np.random.default_rng(3)
    info = np.iinfo(dt)       # large values: products and sums wrap, as in NumPy
    a = rng.integers(info.min // 2, info.max // 2, lshape, endpoint=True).astype(dt)
    b = rng.integers(info.min // 2, info.max // 2, rshape, endpoint=True).astype(dt)
    f = lambda a, b: lax.dot_general(a, b, dims)  # noqa: E731
    with np.errstate(over="ignore"):
        want = f(a, b)
    np.testing.assert_array_equal(jit(f)(a, b), want)
    labels = _labels(f, a, b)
    assert labels[-1] == "native:dot_general"
    assert labels[:-1] == [] if native else set(labels[:-1]) == {"native:transpose"}


def test_mixed_precision_dots_convert_then_multiply_natively():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    g = lambda x: lax.dot_general(x, x, (((1,), (1,)), ((), ())),  # noqa: E731
                                  preferred_element_type=np.float64)
    assert _labels(g, x) == ["native:convert_element_type", "native:dot_general"]
    got = jit(g)(x)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, g(x), rtol=1e-15)
    i = rng.integers(-100, 100, (5, 6)).astype(np.int8)        # int8 products summed in int32
    h = lambda i: lax.dot_general(i, i, (((1,), (1,)), ((), ())),  # noqa: E731
                                  preferred_element_type=np.int32)
    np.testing.assert_array_equal(jit(h)(i), h(i))
    assert "native:dot_general" in _labels(h, i)


def test_non_contiguous_and_special_values():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((8, 6))[:, ::2]            # not contiguous: copied first
    b = rng.standard_normal((3, 5))
    b[0, 0], b[1, 1] = np.inf, np.nan
    f = jit(lambda a, b: a @ b)
    np.testing.assert_allclose(f(a, b), a @ b)


def test_mlp_training_step_runs_its_matmuls_natively():
    rng = np.random.default_rng(2)
    w1, w2 = rng.standard_normal((6, 5)), rng.standard_normal((5, 3))
    x, y = rng.standard_normal((4, 6)), rng.standard_normal((4, 3))

    def loss(params, x, y):
        w1, w2 = params
        return fnp.mean((fnp.tanh(x @ w1) @ w2 - y) ** 2)

    step = lambda params, x, y: fgrad.tree.map(  # noqa: E731
        lambda p, g: p - 0.1 * g, params, fgrad.grad(loss)(params, x, y))
    labels = _labels(step, (w1, w2), x, y)
    assert not any(lab == "numpy:dot_general" for lab in labels), labels
    for got, want in zip(jit(step)((w1, w2), x, y), step((w1, w2), x, y)):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_small_products_run_on_the_calling_thread_only():
    small = jit(lambda a, b: a @ b)
    a, b = np.ones((8, 16), np.float32), np.ones((16, 4), np.float32)
    ir_small = compile_jaxpr(small.lower(a, b).jaxpr, "f").llvm_ir
    assert "scipy_openblas_set_num_threads64_" in ir_small
    # over PROBE_GEMM multiply-adds a product is never split: OpenBLAS's threads run it
    # (a product of rows 1000 wide: not a lane product, see blas.lane_rows)
    big_a, big_b = np.ones((1024, 1024), np.float32), np.ones((1024, 1000), np.float32)
    ir_big = compile_jaxpr(jit(lambda a, b: a @ b).lower(big_a, big_b).jaxpr, "g").llvm_ir
    assert "scipy_openblas_set_num_threads64_" not in ir_big
    lib = blas._numpy_openblas()
    before = lib.scipy_openblas_get_num_threads64_()
    np.testing.assert_array_equal(small(a, b), a @ b)
    assert lib.scipy_openblas_get_num_threads64_() == before    # restored


def _lane_product(a, b):
    """a @ b by the lane product's ctypes function, from zero."""
    out = np.zeros((a.shape[0], b.shape[1]), a.dtype)
    lane_product.function(a.dtype)(a.ctypes.data, a.shape[1], 1, 0, b.ctypes.data, b.shape[1], 0,
                                   out.ctypes.data, b.shape[1], a.shape[0], b.shape[1],
                                   a.shape[1], 1)
    return out


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("m,k,n", [(200, 200, 300), (130, 600, 300), (64, 784, 512),
                                   (100, 1024, 100), (300, 1500, 40)])
def test_products_give_eager_bits_whatever_their_shape(m, k, n, dt):
    """For some shapes OpenBLAS's threads give other bits than the row ranges
    fgrad's workers split a product into (blas.splits_exactly); those run as
    the ranges, each a gemm on one thread, wherever they run: eagerly, alone,
    batched, in a loop's body, so jit and eager agree."""
    a = RNG.standard_normal((m, k)).astype(dt)
    b = RNG.standard_normal((k, n)).astype(dt)
    eager = np.asarray(fnp.asarray(a) @ b)
    parts = blas.parts_of(dt, m, n, k, False)
    if blas.lane_rows(dt, n):                           # fgrad's lane product, rows cut anywhere
        np.testing.assert_array_equal(eager, np.concatenate(
            [_lane_product(a[r], b) for r in (slice(0, 7), slice(7, m))]))
    elif parts:
        rows = [slice(c * m // parts, (c + 1) * m // parts) for c in range(parts)]
        np.testing.assert_array_equal(eager, np.concatenate(
            [blas.gemm_from_python(a[r], b) for r in rows]))
    else:
        np.testing.assert_array_equal(eager, a @ b)         # NumPy's call
    np.testing.assert_array_equal(np.asarray(jit(lambda a, b: a @ b)(a, b)), eager)
    step = jit(lambda a, b: lax.scan(lambda c, _: (c + a @ b, None), a @ b * 0, None, 2)[0])
    np.testing.assert_array_equal(np.asarray(step(a, b)), eager + eager)
    x, y = (RNG.standard_normal((2, m, k)).astype(dt) for _ in range(2))
    dims = (((2,), (2,)), ((0,), (0,)))         # a batch of x @ y^T
    np.testing.assert_array_equal(np.asarray(jit(lambda x, y: lax.dot_general(x, y, dims))(x, y)),
                                  np.asarray(lax.dot_general(fnp.asarray(x), y, dims)))


@pytest.mark.parametrize("dt,m,k,n", [(np.float32, 128, 784, 512), (np.float64, 33, 1000, 1000)])
def test_products_among_other_kernels_transposed_and_differentiated_give_eager_bits(dt, m, k, n):
    """The same agreement where a product shares a segment with element-wise
    kernels (split over the workers), reads transposed operands, or comes from
    grad and vmap: shapes whose OpenBLAS-threaded bits differ from the split's."""
    a = RNG.standard_normal((m, k)).astype(dt)
    b = RNG.standard_normal((k, n)).astype(dt)
    cases = [lambda a, b: (a @ b) * 2.0 + 1.0,
             lambda a, b: b.T @ a.T,
             lambda a, b: fgrad.grad(lambda b: fnp.sum((a @ b) * (a @ b)))(b),
             lambda a, b: fgrad.vmap(lambda r, b: r @ b, in_axes=(0, None))(a, b)]
    for f in cases:
        eager = np.asarray(f(fnp.asarray(a), fnp.asarray(b)))
        np.testing.assert_array_equal(np.asarray(jit(f)(a, b)), eager)


def test_eager_products_on_python_threads_keep_openblas_thread_count():
    """Python threads running eager products in parts at once (each pins
    OpenBLAS to one thread meanwhile) leave its thread count as they found it,
    and each gets the bits of one product alone."""
    lib = blas._numpy_openblas()
    before = lib.scipy_openblas_get_num_threads64_()
    shapes = [(300, 600, 200), (64, 784, 96), (200, 200, 300)]
    pairs = [tuple(RNG.standard_normal(s).astype(dt) for s in ((m, k), (k, n)))
             for m, k, n in shapes for dt in (np.float32, np.float64)]
    want = [np.asarray(fnp.asarray(a) @ b) for a, b in pairs]
    results = []

    def work():
        for _ in range(10):
            results.append(all(np.array_equal(np.asarray(fnp.asarray(a) @ b), w)
                               for (a, b), w in zip(pairs, want)))

    workers = [threading.Thread(target=work) for _ in range(4)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert results == [True] * 40
    assert lib.scipy_openblas_get_num_threads64_() == before


@pytest.mark.parametrize("lshape,rshape,dims", [
    ((6, 7), (7,), (((1,), (0,)), ((), ()))),          # matrix @ vector
    ((7, 6), (7,), (((0,), (0,)), ((), ()))),          # matrix^T @ vector
    ((7,), (7, 4), (((0,), (0,)), ((), ()))),          # vector @ matrix
    ((7,), (4, 7), (((0,), (1,)), ((), ()))),          # vector @ matrix^T
    ((3, 1, 7), (3, 7, 5), (((2,), (1,)), ((0,), (0,)))),   # batched rows
])
def test_matrix_vector_products_use_gemv(lshape, rshape, dims):
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal(lshape), rng.standard_normal(rshape)
    f = lambda a, b: lax.dot_general(a, b, dims)  # noqa: E731
    np.testing.assert_allclose(jit(f)(a, b), f(a, b), rtol=1e-12)
    ir_text = compile_jaxpr(jit(f).lower(a, b).jaxpr, "f").llvm_ir
    assert "call void @\"scipy_cblas_dgemv64_\"" in ir_text
    assert "call void @\"scipy_cblas_dgemm64_\"" not in ir_text


def test_gradients_of_dots_in_any_layout_run_natively():
    """jit(grad) of einsums whose products need transposed operands: no NumPy step,
    and the gradient matches the interpreter's."""
    rng = np.random.default_rng(5)
    q = rng.standard_normal((2, 5, 3, 4))
    k = rng.standard_normal((2, 6, 3, 4))

    def loss(q, k):
        return fnp.sum(fnp.tanh(fnp.einsum("bqhd,bkhd->bhqk", q, k)) ** 2)
    g = jit(fgrad.grad(loss, argnums=(0, 1)))
    for got, want in zip(g(q, k), fgrad.grad(loss, argnums=(0, 1))(q, k)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    labels = _labels(fgrad.grad(loss, argnums=(0, 1)), q, k)
    assert labels and all(lab.startswith("native:") for lab in labels), labels


def test_one_weight_for_a_batch_is_one_gemm():
    """x @ w for x of shape (B, M, K) is one gemm of B*M rows; w's cotangent, summed
    over the batch and the rows, is one gemm of the operands as stored (no copies)."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 5, 7)).astype(np.float32)
    w = rng.standard_normal((7, 3)).astype(np.float32)
    (eqn,) = [e for e in jit(lambda x, w: x @ w).lower(x, w).jaxpr.jaxpr.eqns
              if e.primitive.name == "dot_general"]
    spec = blas.gemm_spec(eqn)
    assert spec.batch == () and (spec.m, spec.n, spec.k) == (20, 3, 7)
    np.testing.assert_array_equal(jit(lambda x, w: x @ w)(x, w), x @ w)

    def loss(w, x):
        return fnp.sum(fnp.maximum(x @ w, 0.0) * 0.5)
    labels = _labels(fgrad.grad(loss), w, x)
    assert labels.count("native:dot_general") == 2 and all(
        lab.startswith("native:") and "transpose" not in lab for lab in labels), labels
    np.testing.assert_array_equal(jit(fgrad.grad(loss))(w, x), fgrad.grad(loss)(w, x))


def _transposes(f, *args):
    """The permutations of the transposes in f's compiled program."""
    closed = compile_jaxpr(jit(f).lower(*args).jaxpr, "f").jaxpr
    return [e.params["permutation"] for e in closed.jaxpr.eqns if e.primitive.name == "transpose"]


def test_operands_are_copied_for_gemm_only_as_needed_and_by_rows():
    """An operand whose layout gemm takes is not copied, heads in the middle
    included (gemm reads rows of d a stride of h*d apart), except a batched rhs
    with a short sum read transposed (attention's q·kᵀ): it is copied
    contracting dims first, so gemm needs no transposed rhs."""
    rng = np.random.default_rng(7)
    q = rng.standard_normal((2, 5, 3, 4)).astype(np.float32)
    k = rng.standard_normal((2, 6, 3, 4)).astype(np.float32)
    p = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    scores = lambda q, k: fnp.einsum("bqhd,bkhd->bhqk", q, k)  # noqa: E731
    assert _transposes(scores, q, k) == [(0, 2, 3, 1)]
    long_q, long_k = (rng.standard_normal((2, n, 3, 80)).astype(np.float32) for n in (5, 6))
    assert _transposes(scores, long_q, long_k) == []
    np.testing.assert_array_equal(jit(scores)(long_q, long_k), scores(long_q, long_k))
    # p^T @ v per (batch, head): p as stored (contracting first), v's rows in place
    pv = lambda p, v: lax.dot_general(p, v, (((2,), (1,)), ((0, 1), (0, 2))))  # noqa: E731
    assert _transposes(pv, p, q) == []
    for f, args in ((scores, (q, k)), (pv, (p, q))):
        np.testing.assert_array_equal(jit(f)(*args), f(*args))


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32])
def test_products_write_a_transposed_result_in_place(dt):
    """A product whose result only a transpose reads writes it transposed (attention's
    heads merged back: one kernel, no copy) where gemm can, with eager's values;
    a transpose that moves the rhs's free dim, or a result read twice, is a copy."""
    rng = np.random.default_rng(5)
    w = (rng.standard_normal((2, 3, 5, 6)) * 4).astype(dt)
    v = (rng.standard_normal((2, 3, 6, 4)) * 4).astype(dt)
    merged = lambda w, v: fnp.reshape(fnp.swapaxes(fnp.matmul(w, v), 1, 2), (2, 5, 12))  # noqa
    moved = lambda w, v: fnp.transpose(fnp.matmul(w, v), (0, 3, 2, 1))  # noqa: E731

    def twice(w, v):
        y = fnp.matmul(w, v)
        return fnp.swapaxes(y, 1, 2), y * 2

    assert _labels(merged, w, v)[0] == "native:dot_general+transpose"
    assert _labels(moved, w, v) == ["native:dot_general", "native:transpose"]
    assert "native:dot_general+transpose" not in _labels(twice, w, v)
    for f in (merged, moved, twice):
        for got, want in zip(fgrad.tree.leaves(jit(f)(w, v)), fgrad.tree.leaves(f(w, v))):
            np.testing.assert_array_equal(got, want)


lanes_here = pytest.mark.skipif(not blas.lane_rows(np.float32, 16),
                                reason="lane products need AVX-512")


@lanes_here
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_lane_products_give_one_set_of_bits_in_every_layout_and_thread_count(dt, monkeypatch):
    """A product whose rows are whole vectors wide is the lane product: jit
    (operands stored either way, batched, on the workers or one thread) and
    eager give the same bits; a transposed rhs is copied once, by a transpose
    kernel of its own."""
    a = RNG.standard_normal((96, 200)).astype(dt)
    b = RNG.standard_normal((200, 64)).astype(dt)
    assert blas.lane_rows(dt, 64) and not blas.lane_rows(dt, 60)
    eager = np.asarray(fnp.asarray(a) @ b)
    code = compile_jaxpr(jit(lambda a, b: a @ b).lower(a, b).jaxpr, "f").llvm_ir
    assert f'call void @"{lane_product.symbol(dt)}"' in code and 'call void @"scipy_cblas' \
        not in code
    at, bt = np.ascontiguousarray(a.T), np.ascontiguousarray(b.T)
    layouts = [(lambda a, b: a @ b, (a, b)), (lambda at, b: at.T @ b, (at, b)),
               (lambda a, bt: a @ bt.T, (a, bt)), (lambda at, bt: at.T @ bt.T, (at, bt))]
    for f, args in layouts:
        np.testing.assert_array_equal(np.asarray(jit(f)(*args)), eager)
        np.testing.assert_array_equal(np.asarray(f(*map(fnp.asarray, args))), eager)
    assert _transposes(layouts[2][0], a, bt) == [(1, 0)]
    stacked = np.stack([a, a[::-1]])
    both = np.asarray(jit(lambda x, b: x @ b)(stacked, b))
    np.testing.assert_array_equal(both[0], eager)
    np.testing.assert_array_equal(both[1], eager[::-1])
    with monkeypatch.context() as m:
        m.setenv("FGRAD_NUM_THREADS", "1")
        np.testing.assert_array_equal(np.asarray(jit(lambda a, b: a @ b)(a, b)), eager)


@lanes_here
def test_a_weights_copy_runs_before_the_layer_and_keeps_rows_chained():
    """x @ w.T with w stored (out, in) (fgrad_nn's Linear): w is copied (in, out)
    right at the start, so the bias and activation still follow each product on
    each thread's rows, with eager's bits."""
    x = RNG.standard_normal((256, 128)).astype(np.float32)
    w1, w2 = (RNG.standard_normal(s).astype(np.float32) / 8 for s in ((256, 128), (128, 256)))
    b1 = RNG.standard_normal(256).astype(np.float32)

    def f(x, w1, w2):
        return fnp.minimum(fnp.maximum(x @ w1.T + b1, 0.0) @ w2.T, 1.0) * 2.0
    labels = _labels(f, x, w1, w2)
    assert [lab.split(" ")[0] for lab in labels[:3]] == \
        ["native:transpose", "native:transpose", "native:dot_general"], labels
    if any("split over" in lab for lab in labels):
        assert "each thread's rows right after the product's" in labels[3], labels
    np.testing.assert_array_equal(np.asarray(jit(f)(x, w1, w2)), np.asarray(f(fnp.asarray(x),
                                                                               w1, w2)))


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("shape", [(256, 256), (256, 64), (137, 153), (1000, 20), (2, 8200)])
def test_transposed_copies_run_in_tiles_with_every_shape(shape, dt):
    """A big copy of a matrix read transposed (a lane product's weight) walks the
    input in TILE x TILE tiles, not a column at a time: the same elements,
    whatever the shape, the split over threads or where the view starts."""
    w = (RNG.standard_normal((shape[0] + 1, shape[1])) * 100).astype(dt)
    for f, want in ((lambda w: fnp.transpose(w[1:]), w[1:].T), (lambda w: w.T, w.T)):
        code = compile_jaxpr(jit(f).lower(w).jaxpr, "f").llvm_ir
        assert '"tu' in code                                # the tiles' loop
        np.testing.assert_array_equal(np.asarray(jit(f)(w)), want)
    for v in (w[:1], w[:, :1]):         # a row or a column: no tiles, one loop
        np.testing.assert_array_equal(np.asarray(jit(fnp.transpose)(v)), v.T)


@lanes_here
def test_programs_with_lane_products_name_their_dtypes_for_the_prefetch():
    """A program's lane products (in a loop's body too) are found before it is
    planned, so their kernel compiles on a background thread meanwhile."""
    a32, b32 = np.ones((4, 8), np.float32), np.ones((8, 32), np.float32)
    body = lambda c, _: (c @ np.ones((32, 32), np.float64), None)  # noqa: E731
    found = [blas.lane_dtypes(jit(f).lower(*args).jaxpr.jaxpr) for f, args in (
        (lambda a, b: a @ b, (a32, b32)),
        (lambda a, b: a @ b[:, :30], (a32, b32)),                # rows 30 wide: OpenBLAS
        (lambda c: lax.scan(body, c, None, 3)[0], (np.ones((4, 32)),)))]
    assert found == [{np.dtype(np.float32)}, set(), {np.dtype(np.float64)}]
