"""The peer libraries, imported once with the same settings for every benchmark.

Each of `torch()`, `jax()`, `autograd()`, `optax()` returns the module, or None
when it cannot be imported; `missing(name)` then says why, and the benchmarks
put that in the row instead of dropping it. JAX runs on the CPU with 64-bit
types enabled (the Helmholtz benchmark is float64; every other benchmark passes
float32 arrays explicitly).
"""
import functools
import importlib
import os

import threads

_errors = {}


def _load(name):
    try:
        return importlib.import_module(name)
    except Exception as e:  # ImportError, or a broken install raising anything
        _errors[name] = f"{type(e).__name__}: {e}".splitlines()[0][:120]
        return None


@functools.cache
def torch():
    mod = _load("torch")
    if mod is not None:
        mod.set_num_threads(threads.COUNT)
    return mod


@functools.cache
def jax():
    mod = _load("jax")
    if mod is not None:
        mod.config.update("jax_enable_x64", True)
        mod.config.update("jax_platforms", "cpu")
    return mod


@functools.cache
def autograd():
    return _load("autograd")


@functools.cache
def optax():
    return _load("optax")


def missing(name):
    """The cell text for a peer that is not there."""
    reason = _errors.get(name, "")
    if reason.startswith("ModuleNotFoundError"):
        return "not installed"
    return f"not importable ({reason})" if reason else "not installed"


def versions():
    """'torch 2.13.0, jax 0.10.2, ...' for the peers that import."""
    out = []
    for name, get in (("torch", torch), ("jax", jax), ("autograd", autograd), ("optax", optax)):
        mod = get()
        version = getattr(mod, "__version__", None) if mod is not None else None
        if mod is not None and version is None:
            from importlib.metadata import version as dist_version
            version = dist_version(name)
        out.append(f"{name} {version}" if mod is not None else f"{name}: {missing(name)}")
    return ", ".join(out)


def torch_compile_ok():
    """torch.compile on CPU needs a C++ compiler; None when usable, else the reason."""
    if torch() is None:
        return missing("torch")
    import shutil
    if not (shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++")):
        return "no C++ compiler for torch.compile"
    return None
