"""sin and cos compiled once and shared by every program (the math runtime).

A program calling sin or cos used to carry their code (the scalar function,
Payne-Hanek and three vector variants), which LLVM optimised and compiled
again for every program: two thirds of the first call of a 100-op chain of
sin. Now `mathlib.emit` only declares them in a program (the scalar function
keeps its `vector-function-abi-variant` attribute, so the loop vectoriser
still calls one variant per vector), and each function is compiled once per
dtype by `engine.compile_runtime` (a new process finds it in the disk cache),
from the same IR `mathlib` emitted inline before: the same code, so the same
bits. Its library is loaded with its symbols global, so that a program's
shared library resolves them when it is loaded (and MCJIT through
`engine.add_symbol`).

`engine` asks `resolve(name)` for each function a module declares (before it
compiles or loads one from the disk cache); the names are fixed here, never
taken from disk.
"""
import re

from . import engine
from .compiler_lock import lock

__all__ = ["resolve"]

FUNCTIONS = ("sin", "cos")
WIDTHS = {"f64": (2, 4, 8), "f32": (4, 8, 16)}     # lanes of their vector variants
_NAME = re.compile(r"fgrad_(sin|cos)_(f32|f64)(?:_v\d+)?\Z")
_loaded = {}        # fgrad_<name>_<f32|f64> -> its CompiledModule (alive for the process)


def resolve(name):
    """Load the runtime code defining `name`, if it is a math-runtime name;
    whether it is one."""
    m = _NAME.match(name)
    if m is None:
        return False
    fname = f"fgrad_{m.group(1)}_{m.group(2)}"
    with lock:
        if fname not in _loaded:
            _loaded[fname] = _load(m.group(1), m.group(2))
    return True


def symbols(name, suffix):
    """The functions the shared code of sin or cos exports: the scalar function,
    then its vector variants."""
    fname = f"fgrad_{name}_{suffix}"
    return [fname] + [f"{fname}_v{n}" for n in WIDTHS[suffix]]


def _load(name, suffix):
    def emit():     # (only when not in the disk cache: mathlib imports llvmlite.ir)
        from . import mathlib
        return mathlib.emit_runtime(name, suffix)
    entries = symbols(name, suffix)
    module = engine.compile_runtime(f"math {entries[0]}", entries, emit, export=True)
    for entry in entries:
        engine.add_symbol(entry, module.address(entry))
    return module


engine.add_resolver(resolve)
