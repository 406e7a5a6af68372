"""Where array values live: devices and the registry of backends that hold them.

The core knows no backend. An Array's value is a NumPy array on the host or
an array of a device backend's own library (CuPy's on a GPU); the core asks
this registry which, and hands device values to the backend that owns them.
A backend registers a `Platform` when fgrad is imported (without loading its
library) and its array type once it loads the library. Until then
`array_types` is empty and the host paths test one empty tuple and nothing else.
"""
import numpy as np

array_types = ()    # the array types of the device backends that have loaded their library
_platform_of_type = {}
_platforms = {}     # name -> Platform


class Platform:
    """What a device backend provides. `name` is the platform's name ("gpu"),
    `aliases` the other names `fgrad.devices(backend)` accepts for it, and
    `missing_hint` says what to install when it has no device."""
    name = aliases = missing_hint = None
    dlpack_device_type = None    # DLPack's number for the platform's devices (kDLCUDA = 2)

    def count(self):
        """How many devices it sees (0 without its library or hardware)."""
        raise NotImplementedError

    def device_kind(self, device_id):
        raise NotImplementedError

    def device_id(self, value):
        """The id of the device holding `value` (an array of this platform)."""
        raise NotImplementedError

    def to_host(self, value):
        """A NumPy copy of `value`."""
        raise NotImplementedError

    def put(self, value, device_id):
        """`value` (NumPy, or an array of this platform) on device `device_id`."""
        raise NotImplementedError

    def run_eager(self, prim, vals, params):
        """Run `prim` eagerly on values of which at least one is this platform's."""
        raise NotImplementedError

    def from_dlpack(self, x, copy):
        """An array of this platform sharing the memory of DLPack producer `x`
        (a copy when `copy`)."""
        raise NotImplementedError

    def compile(self, closed_jaxpr, name):
        """A callable running `closed_jaxpr` on this platform's arrays (for `jit`)."""
        raise NotImplementedError


def register(platform):
    """Make a backend's devices known (called once when the backend is imported)."""
    _platforms[platform.name] = platform


def register_array_type(array_type, platform_name):
    """Arrays of `array_type` live on `platform_name`'s devices (called by the
    backend when it loads the library that defines the type)."""
    global array_types
    _platform_of_type[array_type] = _platforms[platform_name]
    array_types = tuple(_platform_of_type)


def platform(name):
    """The registered platform called `name` (or one of its aliases), or None."""
    for p in _platforms.values():
        if name == p.name or name in p.aliases:
            return p
    return None


def platform_for_dlpack(device_type):
    """The registered platform whose devices have DLPack device type `device_type`."""
    for p in _platforms.values():
        if p.dlpack_device_type == device_type:
            return p
    return None


def platforms():
    return list(_platforms.values())


def platform_of(value):
    """The Platform holding `value`, or None for a host value."""
    if array_types and isinstance(value, array_types):
        return _platform_of_type[type(value)]
    return None


def on_device(values):
    """The Platform of the first device value among `values`, or None when all
    live on the host."""
    if array_types:
        for v in values:
            if isinstance(v, array_types):
                return _platform_of_type[type(v)]
    return None


def to_host(value):
    """A NumPy array of `value`: a copy of a device value, host values as they are."""
    p = platform_of(value)
    return np.asarray(value) if p is None else p.to_host(value)


class Device:
    """A place arrays live: platform 'cpu' or a backend's ('gpu') and an id."""
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
        return platform(self.platform).device_kind(self.id)


CPU = Device("cpu", 0)


def device_of(value):
    """The Device an array's value lives on."""
    p = platform_of(value)
    return CPU if p is None else Device(p.name, p.device_id(value))
