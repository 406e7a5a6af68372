"""sin and cos compiled once and shared by every program (the math runtime).

A program calling sin or cos used to carry their code (the scalar function,
Payne-Hanek and three vector variants), which LLVM optimised and compiled
again for every program: two thirds of the first call of a 100-op chain of
sin. Now `mathlib.emit` only declares them in a program (the scalar function
keeps its `vector-function-abi-variant` attribute, so the loop vectoriser
still calls one variant per vector), and each function is compiled once per
dtype by `engine.compile_runtime` (a new process finds it in the disk cache),
from the same IR `mathlib` emitted inline before: the same code, so the same
bits. (Long loops define the vector variant of their width themselves, for
the loop to inline, and call the exported scalar slow path `_ph` for the lanes
beyond its fast path: `mathlib.inline_trig_variants`.) Its library is loaded
with its symbols global, so that a program's
shared library resolves them when it is loaded (and MCJIT through
`engine.add_symbol`).

`engine` asks `resolve(name)` for each function a module declares (before it
compiles or loads one from the disk cache); the names are fixed here, never
taken from disk. `prefetch(to_compile(jaxpr))`, when a program is about to be
planned, starts that on a background thread for the sin and cos the program
computes that the disk cache lacks: LLVM then compiles them (about 55 ms of a
fresh process's first call) while Python plans and emits the program (the
thread holds the compiler lock meanwhile, as any compile does). Their IR is
emitted before the thread starts, on the caller's thread.
"""
import re

import numpy as np

from ..jaxpr import all_eqns
from . import engine, switch_interval
from .compiler_lock import lock

__all__ = ["resolve", "to_compile", "prefetch"]

FUNCTIONS = ("sin", "cos")
WIDTHS = {"f64": (2, 4, 8), "f32": (4, 8, 16)}     # lanes of their vector variants
_NAME = re.compile(r"fgrad_(sin|cos)_(f32|f64)(?:_v\d+|_ph)?\Z")
_loaded = {}        # fgrad_<name>_<f32|f64> -> its CompiledModule (alive for the process)
_prefetched = set()  # names a prefetch thread was started for
# the real type whose sin and cos a primitive's dtype calls
_SUFFIX = {np.dtype(t): s for t, s in ((np.float32, "f32"), (np.complex64, "f32"),
                                        (np.float64, "f64"), (np.complex128, "f64"))}


def resolve(name, text=None):
    """Load the runtime code defining `name`, if it is a math-runtime name;
    whether it is one. `text`: its IR, when already emitted (`prefetch`)."""
    m = _NAME.match(name)
    if m is None:
        return False
    fname = f"fgrad_{m.group(1)}_{m.group(2)}"
    with lock:
        if fname not in _loaded:
            _loaded[fname] = _load(m.group(1), m.group(2), text)
    return True


def to_compile(jaxpr):
    """The runtime functions the sin and cos equations in `jaxpr` (and its
    sub-jaxprs) call that are neither loaded, nor in the disk cache, nor being
    prefetched."""
    names = {f"fgrad_{p}_{s}" for p, s in _calls(jaxpr)} - _loaded.keys() - _prefetched
    return sorted(n for n in names if not engine.runtime_cached(_tag(n)))


def prefetch(names):
    """Emit the IR of `names` (runtime function names from `to_compile`) here
    and compile it on a background thread, with a short GIL switch interval
    (see `switch_interval`). Emitting is Python, which would only share the
    GIL with the caller's work on that thread and reach LLVM later."""
    if names:
        _prefetched.update(names)
        texts = [(name, _emit(*_NAME.match(name).groups())) for name in names]
        switch_interval.compile_in_background(resolve, texts, "fgrad math runtime")


def _calls(jaxpr):
    """(sin or cos, f32 or f64) of each such equation in `jaxpr`, nested ones too."""
    for eqn in all_eqns(jaxpr):
        name = eqn.primitive.name
        if name in FUNCTIONS and eqn.outvars[0].aval.dtype in _SUFFIX:
            yield name, _SUFFIX[eqn.outvars[0].aval.dtype]


def symbols(name, suffix):
    """The functions the shared code of sin or cos exports: the scalar function,
    its vector variants, then the scalar slow path (what a variant that a
    program defines itself calls for the lanes beyond its fast path)."""
    fname = f"fgrad_{name}_{suffix}"
    return [fname] + [f"{fname}_v{n}" for n in WIDTHS[suffix]] + [f"{fname}_ph"]


def _tag(fname):
    return f"math {fname}"


def _emit(name, suffix):
    from . import mathlib   # (only when not in the disk cache: it imports llvmlite.ir)
    return mathlib.emit_runtime(name, suffix)


def _load(name, suffix, text=None):
    def emit():
        return _emit(name, suffix) if text is None else text
    entries = symbols(name, suffix)
    module = engine.compile_runtime(_tag(entries[0]), entries, emit, export=True)
    for entry in entries:
        engine.add_symbol(entry, module.address(entry))
    return module


engine.add_resolver(resolve)
