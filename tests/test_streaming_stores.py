"""Streaming (non-temporal) stores of big element-wise outputs (cpu/streaming):
the same bits as plain stores, whatever the sizes, dtypes, alignments and
thread split; emitted only from the last-level cache's size."""
import re

import numpy as np
import pytest

import fgrad.numpy as fnp
from fgrad import jit
from fgrad._src.cpu import engine, fused, pool, streaming
from fgrad._src.jit.primitive import compile_jaxpr

pytestmark = pytest.mark.skipif(not fused._x86(), reason="streaming stores are x86 only")


def _exe(f, *args):
    return compile_jaxpr(jit(f).lower(*args).jaxpr, "f")


def _both(monkeypatch, f, *args):
    """f's executable compiled with plain stores, then with streaming ones."""
    monkeypatch.setattr(streaming, "stream_bytes", lambda: 1 << 62)
    plain = _exe(f, *args)
    monkeypatch.setattr(streaming, "stream_bytes", lambda: 0)
    streamed = _exe(f, *args)
    return plain, streamed


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(a.view(np.uint8), b.view(np.uint8))


def sin_exp(x, y):
    return fnp.sin(x) * y + fnp.exp(-x * x)


def mixed(x, y):        # outputs of three item sizes: blocks end on the first one's lines
    return x * y, (x < y), (x + y).astype(np.float64)


@pytest.mark.parametrize("n", [1, 15, 16, 17, 1000, 2047, 2049, 4096 + 3, 100_003])
@pytest.mark.parametrize("threads", ["1", "3"])
def test_streamed_outputs_have_the_plain_bits(monkeypatch, n, threads):
    if threads != "1" and not pool.supported():
        pytest.skip("native workers need x86-64 Linux")
    monkeypatch.setattr(fused, "SPLIT_WORK", 0)
    monkeypatch.setenv("FGRAD_NUM_THREADS", threads)
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n + 3).astype(np.float32)[3:]   # inputs off their lines
    y = rng.standard_normal(n).astype(np.float32)
    for f in (sin_exp, mixed):
        plain, streamed = _both(monkeypatch, f, x, y)
        assert "!nontemporal" not in plain.llvm_ir
        assert ("!nontemporal" in streamed.llvm_ir) == (n > 1)   # 1 element: no loop
        wants = [plain(x, y), plain(y, x)]
        for k in range(4):       # each output likely on memory the other inputs' filled
            for got, want in zip(streamed(*((x, y), (y, x))[k % 2]), wants[k % 2]):
                _same_bits(got, want)


def test_streaming_emits_nontemporal_stores_and_a_fence(monkeypatch):
    x = np.ones(5000, np.float32)
    plain, streamed = _both(monkeypatch, sin_exp, x, x)
    asm = engine.optimized_asm(streamed.llvm_ir)
    assert re.search(r"\bvmovntps\b|\bmovntps\b|\bvmovntdq\b|\bmovntdq\b", asm)
    assert "sfence" in asm
    assert "movnt" not in engine.optimized_asm(plain.llvm_ir)


def test_only_outputs_as_big_as_the_last_level_cache_stream():
    size = streaming.stream_bytes()
    assert streaming.wanted(True, size) and not streaming.wanted(True, size - 1)
    assert not streaming.wanted(False, size)


def test_cache_size_reads_the_highest_level(tmp_path):
    for k, (level, size) in enumerate([(1, "48K"), (2, "2048K"), (3, "491520K")]):
        (tmp_path / f"index{k}").mkdir()
        (tmp_path / f"index{k}" / "level").write_text(f"{level}\n")
        (tmp_path / f"index{k}" / "size").write_text(f"{size}\n")
    (tmp_path / "uevent").write_text("")
    assert streaming.cache_size(str(tmp_path)) == 480 << 20
    assert streaming.cache_size(str(tmp_path / "missing")) == streaming.DEFAULT_CACHE


def test_a_streamed_block_reports_a_selector_error(monkeypatch):
    from fgrad import lax
    monkeypatch.setattr(streaming, "stream_bytes", lambda: 0)
    n = 5000                      # three blocks; the bad selector is in the last
    cases = [np.arange(n, dtype=np.float32) * k for k in (1, 10, 100)]
    which = np.arange(n, dtype=np.int32) % 3
    g = jit(lambda w, a, b, c: lax.select_n(w, a, b, c))
    assert "!nontemporal" in _exe(g, which, *cases).llvm_ir
    _same_bits(g(which, *cases), np.choose(which, cases))
    which[-2] = 7
    with pytest.raises(ValueError, match="invalid entry"):
        g(which, *cases)
