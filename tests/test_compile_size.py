"""Compile cost of programs that move many small arrays: the optimised code must
grow with the number of equations, not with the elements each one moves (loops
that only copy stay rolled, see fgrad._src.cpu.loops.no_unroll), and the kernels
so compiled still give eager's bits. No timings: sizes of the optimised IR."""
import re

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad._src.cpu import engine, fused


def image_grid(nrow, ncol, imagevecs, imshape):
    """Tiles images into a grid (the helper of JAX's mnist_vae example)."""
    images = iter(imagevecs.reshape((-1,) + imshape))
    return fnp.vstack([fnp.hstack([next(images).T for _ in range(ncol)][::-1])
                       for _ in range(nrow)]).T


def _optimized(fn, *args):
    """(optimised LLVM IR of jit(fn)'s native module, number of jaxpr equations)."""
    text = fgrad.jit(fn).lower(*args).as_text()
    ir = engine.optimized_ir(text[text.index("; ModuleID"):])
    return ir, len(fgrad.make_jaxpr(fn)(*args).jaxpr.eqns)


def _stores(ir):
    return len(re.findall(r"^\s+store ", ir, re.M))


@pytest.mark.parametrize("n", [2, 4, 5])
def test_image_grid_code_grows_with_equations_not_elements(n):
    # each 28x28 transpose or concatenate operand is one rolled loop: a handful of
    # stores per equation (fully unrolled, each wrote 28*28 elements in ~100 stores);
    # at n = 5 the final 140x140 transpose is a tiled copy, its 9 column tiles not
    # unrolled either
    x = np.zeros((n * n, 784), np.float32)
    ir, eqns = _optimized(lambda v: image_grid(n, n, v, (28, 28)), x)
    assert _stores(ir) <= 2 * eqns, (_stores(ir), eqns)


def test_image_grid_code_size_is_linear_in_program_size():
    sizes = {}
    for n in (2, 4):
        x = np.zeros((n * n, 784), np.float32)
        ir, eqns = _optimized(lambda v: image_grid(n, n, v, (28, 28)), x)
        sizes[n] = (ir.count("\n"), eqns)
    (lines2, eqns2), (lines4, eqns4) = sizes[2], sizes[4]
    assert lines4 / lines2 <= 1.5 * eqns4 / eqns2, sizes


def test_move_loops_are_marked_not_to_unroll():
    x = np.zeros((28, 28), np.float32)
    text = fgrad.jit(lambda a: fnp.concatenate([a.T, fnp.pad(a, 1)[1:-1, 1:-1]], 1)) \
        .lower(x).as_text()
    assert text.count('"llvm.loop.unroll.disable"') == 1     # one shared property node
    assert len(re.findall(r"br i1 .*!llvm\.loop", text)) >= 3  # transpose, pad, concatenate


@pytest.mark.parametrize("n", [1, 2, 3])
def test_image_grid_jit_equals_eager(n):
    x = np.random.default_rng(n).standard_normal((n * n, 784)).astype(np.float32)
    out = fgrad.jit(lambda v: image_grid(n, n, v, (28, 28)))(x)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(image_grid(n, n, fnp.asarray(x),
                                                                         (28, 28))))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.complex64, np.bool_])
def test_rolled_moves_jit_equals_eager(dtype):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((5, 7, 3)) * 5).astype(dtype)

    def f(a):
        t = fnp.transpose(a, (2, 0, 1))
        p = fnp.pad(a, ((1, 2), (0, 1), (2, 0)))
        c = fnp.concatenate([a, a[::-1], a[:, ::2]], axis=1)
        return t, p, c, fnp.broadcast_to(a[:, :1], (5, 4, 3))

    for got, want in zip(fgrad.jit(f)(x), f(fnp.asarray(x))):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_repeated_kernels_are_compiled_once():
    # image_grid runs most of its 28x28 transposes as kernels of their own: all but
    # the first forward to the first one's code (fused._emit_forward)
    x = np.random.default_rng(0).standard_normal((9, 784)).astype(np.float32)
    fn = lambda v: image_grid(3, 3, v, (28, 28))  # noqa: E731
    text = fgrad.jit(fn).lower(x).as_text()
    standalone = [ln for ln in text.splitlines()
                  if re.match(r"// \d+: native:transpose$", ln)]
    forwards = re.findall(r"call void @\S+\(ptr %\"args\"\) noinline", text)
    assert len(standalone) >= 2 and len(forwards) == len(standalone) - 1, (standalone, forwards)
    np.testing.assert_array_equal(np.asarray(fgrad.jit(fn)(x)),
                                  np.asarray(fn(fnp.asarray(x))))


def test_copies_of_views_over_different_extents_read_their_own_rows():
    # the copies behind x[1], x[:, 0], x[0, 1] and x[2] (4, 3, 1 and 4 elements) read
    # the input through their views in one native segment; each keeps its own
    # extent (an earlier forwarding of equal code ran x[1]'s 4-row copy into
    # x[:, 0]'s 3 rows)
    x = np.arange(12.0).reshape(3, 4)
    f = fgrad.jit(lambda x: (x[1], x[:, 0], x[0, 1], x[2]))
    for got, want in zip(f(x), (x[1], x[:, 0], x[0, 1], x[2])):
        np.testing.assert_array_equal(np.asarray(got), want)
    steps = [ln for ln in f.lower(x).as_text().splitlines() if re.match(r"// \d+: ", ln)]
    assert steps and all(ln.endswith("[segment 0]") for ln in steps), steps


@pytest.mark.parametrize("length", [10, 11])
def test_native_scan_body_is_optimised_once(length):
    # the loop's driver calls the body's segment (iteration 0, a pair, the odd one
    # out) rather than inlining three copies: O3 vectorises and compiles the body
    # once (fused._emit_loop); its bits are those of the unrolled loop's kernel
    from fgrad import lax
    x = np.linspace(-3, 3, 8, dtype=np.float32)

    def step(c):
        return fnp.sin(c) * 0.5 + 0.25

    def scanned(v):
        return lax.scan(lambda c, _: (step(c), None), v, None, length=length)[0]

    def unrolled(v):
        for _ in range(length):
            v = step(v)
        return v

    ir, _ = _optimized(scanned, x)
    assert len(re.findall(r"call .*@fgrad_sin_f32(_v\d+)?\(", ir)) == 1, ir
    np.testing.assert_array_equal(np.asarray(fgrad.jit(scanned)(x)),
                                  np.asarray(fgrad.jit(unrolled)(x)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_trig_loop_width_hint_changes_no_code(dtype, n, monkeypatch):
    # fused._trig_width names the width LLVM's vectoriser would pick (sparing its
    # search over widths) and asks for no pair of vectors (a row is one): the
    # optimised code is that of the loop without the hint and with a pair asked for
    # (the loop emitted as a loop: not as vector code, see the next test)
    monkeypatch.setattr(fused, "_one_vector", lambda *args: None)
    x = np.linspace(-2, 2, n).astype(dtype)
    text = fgrad.jit(lambda v: fnp.sin(v) * 1.5 + fnp.cos(v)).lower(x).as_text()
    text = text[text.index("; ModuleID"):]
    unhinted = text.replace('!"llvm.loop.vectorize.width"', '!"fgrad.unused.width"')
    if unhinted != text:
        unhinted = unhinted.replace('!"llvm.loop.interleave.count", i32 1 }',
                                    '!"llvm.loop.interleave.count", i32 2 }')

    def code(ir):      # loop metadata numbers and properties left out
        return re.sub(r"^!.*$|, !llvm\.loop !\d+", "", engine.optimized_ir(ir), flags=re.M)
    assert code(text) == code(unhinted)
    if n * np.dtype(dtype).itemsize == 16:      # one 128-bit vector: hinted on every host
        assert text != unhinted and '!"llvm.loop.interleave.count", i32 1 }' in text


def _functions(asm):
    """Each function's assembly, local labels numbered per function."""
    return re.sub(r"\.(LBB|LCPI|Ltmp)\d+_\d+", ".L", asm)


def _line(n, dtype, shift=0.0):
    return (np.linspace(-3, 3, n) + shift).astype(dtype)


_ONE_VECTOR = [
    ("chain", lambda x: fnp.sin(fnp.sin(x) * 1.5) * 2.0, (_line(8, np.float32),)),
    ("two inputs", lambda x, y: fnp.cos(x) / (y - 0.5) + (-x) * fnp.sin(y),
     (_line(8, np.float32), _line(8, np.float32, 0.1))),
    ("a scalar", lambda x, a: fnp.sin(x * a) + a, (_line(8, np.float32), np.float32(0.7))),
    ("float64", lambda x: fnp.sin(x) * fnp.cos(x) - x, (_line(4, np.float64),)),
    ("16 lanes", lambda x: fnp.cos(x) + 1.0, (_line(16, np.float32),)),
]


@pytest.mark.parametrize("name, fn, args", _ONE_VECTOR, ids=[c[0] for c in _ONE_VECTOR])
def test_a_loop_over_one_vector_is_emitted_as_the_vector_code_it_becomes(name, fn, args,
                                                                         monkeypatch):
    # fused._one_vector: a kernel calling sin or cos over exactly one vector is
    # emitted as vector code (no loop for the vectoriser): the same assembly as
    # the loop's, so the same bits; and what it computes is what eager computes
    x = args[0]
    n = x.size
    if n * x.dtype.itemsize * 8 > engine.host_vector_bits():
        pytest.skip("the host's vectors are narrower")

    def text():
        t = fgrad.jit(fn).lower(*args).as_text()
        return t[t.index("; ModuleID"):]
    vector = text()
    assert re.search(rf"call <{n} x (float|double)> @\"fgrad_(sin|cos)_f\d\d_v{n}\"", vector)
    assert "llvm.loop" not in vector
    with monkeypatch.context() as m:
        m.setattr(fused, "_one_vector", lambda *a: None)
        loop = text()
    assert "llvm.loop" in loop
    assert _functions(engine.optimized_asm(vector)) == _functions(engine.optimized_asm(loop))
    np.testing.assert_allclose(np.asarray(fgrad.jit(fn)(*args)), np.asarray(fn(*args)),
                               rtol=1e-6 if x.dtype == np.float32 else 1e-14)


def test_a_kernel_worth_splitting_over_threads_stays_a_loop(monkeypatch):
    # its body may run a part of the vector on each thread (fused.parallel_plan)
    monkeypatch.setattr(fused, "SPLIT_WORK", 10)
    x = _line(8, np.float32)
    f = fgrad.jit(lambda v: fnp.sin(v) * 2.0)
    t = f.lower(x).as_text()
    assert "(split over" in t and "llvm.loop" in t and "load <8 x float>" not in t
    np.testing.assert_allclose(np.asarray(f(x)), np.sin(x) * 2.0, rtol=1e-6)
