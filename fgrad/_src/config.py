"""Global switches: `fgrad.config.update(name, value)`."""
import os

import numpy as np


def _flag(name):
    return os.environ.get(name, "0").strip().lower() not in ("", "0", "false", "no")


_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def _bytes(name, default):
    """A size in bytes from environment variable `name` ('1073741824', '512M',
    '2G'; binary units), else `default`; a malformed value warns and gives it."""
    text = os.environ.get(name, "").strip().lower().removesuffix("ib").removesuffix("b")
    if not text:
        return default
    unit = text[-1] if text[-1] in _UNITS else ""
    try:
        value = float(text[:len(text) - len(unit)]) * _UNITS[unit]
        if value >= 0:
            return int(value)
    except ValueError:
        pass
    import warnings
    warnings.warn(f"{name}={os.environ[name]!r} is not a size in bytes (e.g. 1073741824, "
                  f"512M, 2G); using {default}", RuntimeWarning, stacklevel=3)
    return default


def _positive_int(name, default):
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise ValueError(f"{name}={value!r} is not a positive whole number; unset it or set "
                         f"e.g. {name}={default}")
    return number


DEFAULT_FLOATS = ("float32", "float64")


def as_default_float(value, where):
    """`value` ('float32', np.float64, ...) as a NumPy dtype among DEFAULT_FLOATS, or
    a clear error. Always the same dtype object per choice (jit compares with `is`)."""
    try:
        d = np.dtype(value)
    except TypeError:
        d = None
    if d is None or d.name not in DEFAULT_FLOATS:
        raise ValueError(f"{where}: the default float must be 'float32' or 'float64', got "
                         f"{value!r}")
    return np.dtype(d.name)


class Config:
    """Settings read by the library; change them with `update`."""

    def __init__(self):
        # Type-check every jaxpr that tracing or a transform builds (tests turn it on).
        self.check_jaxprs = _flag("FGRAD_CHECK_JAXPRS")
        # Run jitted functions eagerly, op by op (for debugging).
        self.disable_jit = _flag("FGRAD_DISABLE_JIT")
        # Log every jit compile (what was traced, why, and how long it took).
        self.log_compiles = _flag("FGRAD_LOG_COMPILES")
        # Raise at the first primitive that makes a NaN or Inf from finite inputs.
        self.debug_nans = _flag("FGRAD_DEBUG_NANS")
        # Compiled CPU code flushes subnormal floats to zero (x86 FTZ/DAZ), as XLA does:
        # much faster when values underflow (e.g. vanishing gradients through a long
        # scan), but results then differ from eager NumPy for subnormal values. Applies
        # to programs compiled after the change.
        self.flush_denormals = _flag("FGRAD_FLUSH_DENORMALS")
        # The disk cache of compiled code is kept under this many bytes by removing the
        # least recently used files (0: nothing is cached on disk).
        self.disk_cache_max_bytes = _bytes("FGRAD_CACHE_MAX_BYTES", 1 << 30)
        # Hide fgrad's own frames in tracebacks of errors raised through transforms.
        self.traceback_filtering = os.environ.get(
            "FGRAD_TRACEBACK_FILTERING", "on").strip().lower() not in ("0", "off", "false", "no")
        # Programs kept in memory per jitted function, and values derived from each
        # traced program (its executable; its jvp, transpose and vmap programs); the
        # least recently used beyond this many are dropped (and made again if needed).
        self.jit_cache_size = _positive_int("FGRAD_JIT_CACHE_SIZE", 1024)
        # grad/value_and_grad/vjp outside any transform record a tape of the primitives'
        # derivative rules instead of a jaxpr (tape.py); off: always the jaxpr path.
        self.eager_tape = os.environ.get(
            "FGRAD_EAGER_TAPE", "on").strip().lower() not in ("0", "off", "false", "no")
        # What Python floats and creation functions become when no dtype is given
        # (float32 or float64; see default_float.py for the scoped setting).
        self.default_float = os.environ.get("FGRAD_DEFAULT_FLOAT", "").strip() or "float32"
        self._listeners = {}

    def update(self, name, value):
        if name.startswith("_") or not hasattr(self, name):
            raise AttributeError(f"unknown fgrad config option {name!r}; known: "
                                 f"{sorted(k for k in vars(self) if not k.startswith('_'))}")
        setattr(self, name, value)

    def __setattr__(self, name, value):
        """Set an option (also `config.name = value`) and tell its listeners."""
        if name == "jit_cache_size" and (type(value) is not int or value < 1):
            raise ValueError(f"fgrad config jit_cache_size must be a positive int (programs "
                             f"kept per jitted function), got {value!r}")
        if name == "default_float":
            where = ("FGRAD_DEFAULT_FLOAT" if "_listeners" not in self.__dict__
                     else "fgrad config default_float")
            value = as_default_float(value, where)
        object.__setattr__(self, name, value)
        for fn in self.__dict__.get("_listeners", {}).get(name, ()):
            fn(value)

    def on_update(self, name, fn):
        """Call fn(value) whenever `update` changes option `name`."""
        self._listeners.setdefault(name, []).append(fn)


config = Config()
