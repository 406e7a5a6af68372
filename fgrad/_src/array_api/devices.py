"""Devices for the standard's `device=` arguments, x.device and x.to_device.

fgrad's device functions are reached through the module that defines the public
fgrad.device_put, so this keeps working wherever fgrad keeps its device registry.
"""
import sys


def _registry():
    import fgrad
    return sys.modules[fgrad.device_put.__module__]


def default_device():
    """Where new arrays go and traced computations run: the first GPU, else the CPU."""
    return _registry().default_device()


def devices():
    return list(_registry().devices())


def place(x, device):
    """x on `device` (None, or the device it is on: x itself)."""
    if device is None or device == getattr(x, "device", None):
        return x
    import fgrad
    if not isinstance(device, fgrad.Device):
        raise TypeError(f"device must be a Device from devices() or x.device, got "
                        f"{type(device).__name__} {device!r}")
    return fgrad.device_put(x, device)
