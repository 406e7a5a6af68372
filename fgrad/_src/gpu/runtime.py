"""The lazy CuPy import and the cheap test for GPU arrays.

`ndarray` stays None until fgrad loads CuPy (the first `device_put` to a GPU
or `devices()` call): while it is None no GPU array can exist inside fgrad,
so the CPU paths never import CuPy. Loading CuPy registers its array type with
the device registry (`placement`), which is how the core tells GPU values apart.
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
        from .. import placement
        placement.register_array_type(cp.ndarray, "gpu")
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


