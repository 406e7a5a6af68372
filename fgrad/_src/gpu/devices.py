"""Devices and explicit transfers: `fgrad.devices()`, `fgrad.device_put`.

An fgrad Array lives where its value does: a NumPy array on the CPU, a CuPy
array on a GPU. Eager operations and `jit` run on the device of their inputs.
Moving data is explicit, as in JAX: `device_put(x, device)` copies a pytree of
arrays to a device; converting a GPU array to NumPy (`np.asarray(x)`) raises
an error that says to call `device_put(x, fgrad.devices("cpu")[0])` first
(scalar conversions such as `float(x)` and printing do copy, as they must).
"""
from .. import tree_util
from ..core import Array, full_lower
from . import runtime


class Device:
    """A place arrays live: platform 'cpu' or 'gpu' and an id."""
    __slots__ = ("platform", "id")

    def __init__(self, platform, id):
        self.platform, self.id = platform, id

    def __eq__(self, other):
        return type(other) is Device and (self.platform, self.id) == (other.platform, other.id)

    def __hash__(self):
        return hash((self.platform, self.id))

    def __repr__(self):
        return f"CpuDevice(id={self.id})" if self.platform == "cpu" else f"CudaDevice(id={self.id})"

    @property
    def device_kind(self):
        if self.platform == "cpu":
            return "cpu"
        props = runtime.cupy().cuda.runtime.getDeviceProperties(self.id)
        name = props["name"]
        return name.decode() if isinstance(name, bytes) else name


CPU = Device("cpu", 0)


def devices(backend=None):
    """The devices fgrad can use: the CPU, then every GPU CuPy sees (none when CuPy
    is not installed). backend: 'cpu' or 'gpu' to list only those."""
    found = [CPU] + [Device("gpu", i) for i in range(runtime.gpu_count())]
    if backend is None:
        return found
    if backend not in ("cpu", "gpu", "cuda"):
        raise ValueError(f"devices: unknown backend {backend!r}; use 'cpu' or 'gpu'")
    platform = "gpu" if backend in ("gpu", "cuda") else "cpu"
    out = [d for d in found if d.platform == platform]
    if not out:
        raise RuntimeError("devices('gpu'): no GPU is available (fgrad's GPU backend needs "
                           "CuPy and an NVIDIA GPU; pip install 'fgrad[gpu]')")
    return out


def default_device():
    """The first GPU when there is one, else the CPU (as JAX chooses)."""
    return devices()[1] if runtime.gpu_count() else CPU


def device_count(backend=None):
    """How many devices the backend has (default: the default device's, as JAX
    counts): the GPUs when there are any, else 1 for the CPU."""
    if backend is None:
        backend = default_device().platform
    return len(devices(backend))


def local_device_count(backend=None):
    """device_count: fgrad runs in one process, so every device is local."""
    return device_count(backend)


def default_backend():
    """'gpu' when a GPU is available, else 'cpu' (where arrays go by default)."""
    return default_device().platform


def device_of(value):
    """The Device an array's value lives on."""
    if runtime.is_gpu_array(value):
        return Device("gpu", value.device.id)
    return CPU


def _put_leaf(x, device):
    if isinstance(x, Array):
        value, weak = x._value, x.weak_type
    elif runtime.is_gpu_array(x):
        value, weak = x, False
    else:
        a = full_lower(x)
        if not isinstance(a, Array):
            raise TypeError(f"device_put: cannot move a traced value ({a!r}); device_put "
                            f"works on concrete arrays outside transforms")
        value, weak = a._value, a.weak_type
    if device.platform == "cpu":
        if runtime.is_gpu_array(value):
            value = value.get()
        return Array(value, weak)
    cp = runtime.cupy()
    with cp.cuda.Device(device.id):
        if runtime.is_gpu_array(value) and value.device.id == device.id:
            return Array(value, weak)
        return Array(cp.asarray(value), weak)


def device_put(x, device=None):
    """A copy of the pytree of arrays `x` on `device` (default: `default_device()`).
    Leaves already there are returned as they are (arrays are immutable)."""
    if device is None:
        device = default_device()
    if not isinstance(device, Device):
        raise TypeError(f"device_put: expected a Device from fgrad.devices(), got "
                        f"{type(device).__name__} {device!r}")
    if device.platform == "gpu" and device.id >= runtime.gpu_count():
        raise ValueError(f"device_put: {device!r} does not exist here ({runtime.gpu_count()} "
                         f"GPU(s) visible); see fgrad.devices()")
    return tree_util.map(lambda leaf: _put_leaf(leaf, device), x)
