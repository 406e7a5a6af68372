"""DLPack both ways with NumPy (and PyTorch where it is installed): shared memory,
read-only export, copies on request, clear errors for traced values."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import ConcretizationError


def _host(x):
    return np.asarray(x)


def test_numpy_reads_an_array_without_a_copy_and_cannot_write_it():
    x = fnp.arange(6.0).reshape(2, 3) * 2.0
    a = np.from_dlpack(x)
    assert np.shares_memory(a, _host(x))
    assert not a.flags.writeable
    np.testing.assert_array_equal(a, [[0, 2, 4], [6, 8, 10]])
    with pytest.raises(ValueError):
        a[0, 0] = 1.0
    assert x.__dlpack_device__() == (1, 0)          # kDLCPU


def test_np_asarray_is_zero_copy_and_read_only():
    a = np.arange(5.0)
    x = fgrad.from_dlpack(a)
    view = np.asarray(x)
    assert np.shares_memory(view, a) and not view.flags.writeable
    y = fnp.sin(x)       # a computed Array: two conversions see one buffer (no copies)
    assert np.shares_memory(np.asarray(y), np.asarray(y))


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "int32", "int64",
                                   "uint8", "bool"])
def test_from_dlpack_shares_numpy_memory(dtype):
    a = (np.arange(12) % 3).astype(dtype).reshape(3, 4)
    x = fgrad.from_dlpack(a)
    assert isinstance(x, fgrad.Array) and x.dtype == a.dtype and x.shape == a.shape
    assert not x.weak_type
    assert np.shares_memory(_host(x), a)
    np.testing.assert_array_equal(_host(x), a)


def test_fgrad_numpy_has_from_dlpack_as_numpy_does():
    a = np.arange(3.0)
    assert fnp.from_dlpack is fgrad.from_dlpack
    assert np.shares_memory(_host(fnp.from_dlpack(a)), a)


def test_from_dlpack_keeps_strides_and_copy_true_makes_contiguous():
    a = np.arange(12.0).reshape(3, 4)
    x = fgrad.from_dlpack(a.T)
    assert np.shares_memory(_host(x), a)
    np.testing.assert_array_equal(_host(x), a.T)
    np.testing.assert_array_equal(_host(fgrad.jit(lambda v: v * 2.0)(x)), a.T * 2.0)
    y = fgrad.from_dlpack(a.T, copy=True)
    assert not np.shares_memory(_host(y), a) and _host(y).flags.c_contiguous
    np.testing.assert_array_equal(_host(y), a.T)


def test_copy_false_never_copies_and_copy_true_always_does():
    a = np.arange(4.0)
    assert np.shares_memory(_host(fgrad.from_dlpack(a, copy=False)), a)
    x = fnp.arange(4.0)
    b = np.from_dlpack(x, copy=True)
    assert not np.shares_memory(b, _host(x)) and b.flags.writeable
    b[0] = 7.0                                      # the copy is the caller's to write
    assert float(x[0]) == 0.0


def test_round_trip_through_fgrad_values_and_grad():
    a = np.linspace(-1.0, 1.0, 5)
    x = fgrad.from_dlpack(np.from_dlpack(fgrad.from_dlpack(a)))
    assert np.shares_memory(_host(x), a)
    np.testing.assert_allclose(_host(fgrad.grad(lambda v: fnp.sum(v ** 3))(x)), 3 * a ** 2)


def test_from_dlpack_onto_the_cpu_device_shares_and_an_array_shares_with_itself():
    a = np.arange(3.0)
    cpu = fgrad.devices("cpu")[0]
    x = fgrad.from_dlpack(a, device=cpu)
    assert np.shares_memory(_host(x), a) and x.device == cpu
    assert np.shares_memory(_host(fgrad.from_dlpack(x)), a)


def test_legacy_consumers_get_a_capsule_and_read_only_buffers_are_copied_for_them():
    x = fnp.arange(3.0)
    legacy = x.__dlpack__()                          # no max_version: the old protocol
    assert type(legacy).__name__ == "PyCapsule"
    ro = np.arange(3.0)
    ro.flags.writeable = False
    y = fgrad.from_dlpack(ro)                        # fgrad keeps the read-only buffer
    assert np.shares_memory(_host(y), ro)
    assert type(y.__dlpack__()).__name__ == "PyCapsule"
    with pytest.raises(BufferError, match="read-only"):
        y.__dlpack__(copy=False)


def test_traced_values_cannot_be_exported():
    def f(v):
        np.from_dlpack(v)
        return v
    for transform in (fgrad.jit, fgrad.grad, fgrad.vmap):
        with pytest.raises(ConcretizationError, match="outside jit/grad"):
            transform(lambda v: fnp.sum(f(v)))(np.arange(3.0))
    with pytest.raises(ConcretizationError, match="outside jit/grad"):
        fgrad.jit(lambda v: fgrad.from_dlpack(v))(np.arange(3.0))


def test_objects_without_dlpack_are_a_clear_error():
    with pytest.raises(TypeError, match="(?s)does not support DLPack.*fgrad.numpy.asarray"):
        fgrad.from_dlpack([1.0, 2.0])


def test_complex_arrays_cross_without_a_copy():
    a = np.arange(6, dtype=np.complex64) * (1 + 2j)
    x = fgrad.from_dlpack(a)
    assert x.dtype == np.complex64 and np.shares_memory(_host(x), a)
    back = np.from_dlpack(x)
    assert back.dtype == np.complex64 and np.shares_memory(back, a)


def test_pytorch_shares_memory_both_ways():
    torch = pytest.importorskip("torch")
    x = fnp.arange(6.0).reshape(2, 3) * 2.0
    t = torch.from_dlpack(x)
    assert t.data_ptr() == _host(x).ctypes.data
    assert t.tolist() == [[0, 2, 4], [6, 8, 10]]
    s = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    y = fgrad.from_dlpack(s.T)
    assert _host(y).ctypes.data == s.data_ptr() and y.dtype == np.float32
    np.testing.assert_array_equal(_host(y), s.T.numpy())
