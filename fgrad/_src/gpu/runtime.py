"""The lazy CuPy import and the cheap test for GPU arrays.

`ndarray` stays None until fgrad loads CuPy (the first `device_put` to a GPU
or `devices()` call): while it is None no GPU array can exist inside fgrad,
so the CPU paths test a single module attribute and never import CuPy.
"""
ndarray = None      # cupy.ndarray once CuPy is loaded
_cupy = None


class GpuUnavailableError(RuntimeError):
    """CuPy is missing or sees no usable GPU."""


def cupy():
    """The cupy module (imported on first use); a clear error when it is missing."""
    global _cupy, ndarray
    if _cupy is None:
        try:
            import cupy as cp
        except ImportError as e:
            raise GpuUnavailableError(
                f"fgrad's GPU backend needs CuPy, which could not be imported ({e}).\n"
                f"  hint: pip install 'fgrad[gpu]' (CuPy for CUDA 12) on a machine with an "
                f"NVIDIA GPU") from e
        _cupy, ndarray = cp, cp.ndarray
    return _cupy


def cupy_if_installed():
    """The cupy module, or None when it cannot be imported."""
    try:
        return cupy()
    except GpuUnavailableError:
        return None


def gpu_count():
    """How many CUDA devices CuPy sees (0 without CuPy or without a GPU)."""
    cp = cupy_if_installed()
    if cp is None:
        return 0
    try:
        return cp.cuda.runtime.getDeviceCount()
    except Exception:       # CUDARuntimeError: no driver / no device
        return 0


def is_gpu_array(x):
    return ndarray is not None and isinstance(x, ndarray)


def any_on_gpu(values):
    """Whether any of `values` is a CuPy array (call only when `ndarray` is set)."""
    nd = ndarray
    for v in values:
        if isinstance(v, nd):
            return True
    return False


def run_eager(prim, vals, params):
    """Run `prim` on values of which at least one lives on a GPU (see `eager`)."""
    from . import eager
    return eager.run(prim, vals, params)
