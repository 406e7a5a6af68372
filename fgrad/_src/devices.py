"""Devices and explicit transfers: `fgrad.devices()`, `fgrad.device_put`.

An fgrad Array lives where its value does: a NumPy array on the CPU, a device
backend's array (CuPy's on a GPU) on that device. Eager operations and `jit`
run on the device of their inputs. Moving data is explicit, as in JAX:
`device_put(x, device)` copies a pytree of arrays to a device; converting a
device array to NumPy (`np.asarray(x)`) raises an error that says to call
`device_put(x, fgrad.devices("cpu")[0])` first (scalar conversions such as
`float(x)` and printing do copy, as they must). The backends are found through
the registry in `placement`.
"""
from . import placement, tree_util
from .core import Array, full_lower
from .placement import CPU, Device


def devices(backend=None):
    """The devices fgrad can use: the CPU, then every device of each registered
    backend (every GPU CuPy sees; none when CuPy is not installed).
    backend: 'cpu' or 'gpu' to list only those."""
    found = [CPU] + [Device(p.name, i) for p in placement.platforms() for i in range(p.count())]
    if backend is None:
        return found
    if backend == "cpu":
        return [CPU]
    p = placement.platform(backend)
    if p is None:
        names = ["cpu"] + [q.name for q in placement.platforms()]
        raise ValueError(f"devices: unknown backend {backend!r}; use one of {names}")
    out = [d for d in found if d.platform == p.name]
    if not out:
        raise RuntimeError(f"devices({backend!r}): no {p.name.upper()} is available "
                           f"({p.missing_hint})")
    return out


def default_device():
    """The first device of a backend when there is one, else the CPU (as JAX chooses)."""
    found = devices()
    return found[1] if len(found) > 1 else CPU


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


def _put_leaf(x, device):
    if isinstance(x, Array):
        value, weak = x._value, x.weak_type
    elif placement.platform_of(x) is not None:
        value, weak = x, False
    else:
        a = full_lower(x)
        if not isinstance(a, Array):
            raise TypeError(f"device_put: cannot move a traced value ({a!r}); device_put "
                            f"works on concrete arrays outside transforms")
        value, weak = a._value, a.weak_type
    if device.platform == "cpu":
        return Array(placement.to_host(value), weak)
    return Array(placement.platform(device.platform).put(value, device.id), weak)


def device_put(x, device=None):
    """A copy of the pytree of arrays `x` on `device` (default: `default_device()`).
    Leaves already there are returned as they are (arrays are immutable)."""
    if device is None:
        device = default_device()
    if not isinstance(device, Device):
        raise TypeError(f"device_put: expected a Device from fgrad.devices(), got "
                        f"{type(device).__name__} {device!r}")
    if device.platform != "cpu":
        p = placement.platform(device.platform)
        count = 0 if p is None else p.count()
        if device.id >= count:
            raise ValueError(f"device_put: {device!r} does not exist here ({count} "
                             f"{device.platform.upper()}(s) visible); see fgrad.devices()")
    return tree_util.map(lambda leaf: _put_leaf(leaf, device), x)
