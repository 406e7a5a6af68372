"""The standard's inspection API: __array_namespace_info__()."""
from .. import dtypes
from . import data_types as _dt
from . import devices as _devices

_KIND_DTYPES = {
    "bool": ("bool",),
    "signed integer": ("int8", "int16", "int32", "int64"),
    "unsigned integer": ("uint8", "uint16", "uint32", "uint64"),
    "integral": ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"),
    "real floating": ("float32", "float64"),
    "complex floating": (),
    "numeric": ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                "float32", "float64"),
}


class Info:
    """What this namespace supports: capabilities, devices and dtypes."""
    __module__ = "fgrad.array_api"

    def capabilities(self):
        """Boolean-mask indexing and data-dependent output shapes (nonzero, unique_*)
        work on concrete arrays; traced code needs the fixed-size fgrad.numpy forms."""
        return {"boolean indexing": True, "data-dependent shapes": True}

    def default_device(self):
        return _devices.default_device()

    def devices(self):
        return _devices.devices()

    def _check_device(self, device):
        if device is not None and device not in _devices.devices():
            raise ValueError(f"unknown device {device!r}; see devices()")

    def default_dtypes(self, *, device=None):
        """fgrad's defaults: its default float (float32 unless set otherwise, read at
        each call), int32, and int32 for indices."""
        self._check_device(device)
        return {"real floating": dtypes.default_float, "complex floating": None,
                "integral": dtypes.default_int, "indexing": dtypes.int32}

    def dtypes(self, *, device=None, kind=None):
        """{name: dtype} of the dtypes of `kind` (a kind name, a tuple of them, or
        None for all)."""
        self._check_device(device)
        if kind is None:
            names = [str(d) for d in _dt.ALL]
        else:
            kinds = kind if isinstance(kind, tuple) else (kind,)
            names = []
            for k in kinds:
                if k not in _KIND_DTYPES:
                    raise ValueError(f"dtypes: unknown kind {k!r}; use one of "
                                     f"{sorted(_KIND_DTYPES)}")
                names += [n for n in _KIND_DTYPES[k] if n not in names]
        return {n: getattr(_dt, n) for n in names}


def __array_namespace_info__():
    return Info()
