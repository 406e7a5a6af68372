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

Each exported function is compiled on its own, as a piece (the scalar
function, one vector variant, or `_ph`: the module's IR with the other
exported functions made internal, so that what it calls stays as internal
copies: the same code), when a program calls it: a program of 8 floats calls
only `_v8`, which alone compiles in less than half the time of the whole
module.

`engine` asks `resolve(name)` for each function a compiled module still calls
(or one loaded from the disk cache declares); the names are fixed here, never
taken from disk. `prefetch(to_compile(jaxpr))`, when a program is about to be
planned, starts that on a background thread for the pieces the sin and cos
the program computes will likely call (`_pieces`: a guess from their shapes)
that the disk cache lacks: LLVM then compiles them while Python plans and
emits the program (the thread holds the compiler lock meanwhile, as any
compile does). Their IR is emitted before the thread starts, on the caller's
thread.
"""
import math
import re

import numpy as np

from ..jaxpr import all_eqns
from . import engine, switch_interval
from .compiler_lock import lock

__all__ = ["resolve", "to_compile", "prefetch"]

FUNCTIONS = ("sin", "cos")
WIDTHS = {"f64": (2, 4, 8), "f32": (4, 8, 16)}     # lanes of their vector variants
#: Loops over this many elements or more define their own vector variant
#: (`mathlib.inline_trig_variants`) and call only the exported `_ph`.
INLINE_TRIG_ELEMENTS = 1 << 18
_NAME = re.compile(r"fgrad_(sin|cos)_(f32|f64)(?:_v\d+|_ph)?\Z")
_loaded = {}        # piece (an exported function's name) -> its CompiledModule
_prefetched = set()  # pieces a prefetch thread was started for
# the real type whose sin and cos a primitive's dtype calls
_SUFFIX = {np.dtype(t): s for t, s in ((np.float32, "f32"), (np.complex64, "f32"),
                                        (np.float64, "f64"), (np.complex128, "f64"))}


def resolve(name, text=None):
    """Load the runtime piece defining `name`, if it is a math-runtime name;
    whether it is one. `text`: the IR of its function's whole runtime module,
    when already emitted (`prefetch`)."""
    m = _NAME.match(name)
    if m is None or name not in symbols(m.group(1), m.group(2)):
        return False
    with lock:
        if name not in _loaded:
            _loaded[name] = _load(name, m.group(1), m.group(2), text)
    return True


def to_compile(jaxpr):
    """The runtime pieces the sin and cos equations in `jaxpr` (and its
    sub-jaxprs) likely call that are neither loaded, nor in the disk cache, nor
    being prefetched."""
    calls = {(eqn.primitive.name, eqn.outvars[0].aval.dtype, eqn.outvars[0].aval.shape)
             for eqn in all_eqns(jaxpr) if eqn.primitive.name in FUNCTIONS}
    names = {p for call in calls for p in _pieces(*call)}
    names -= _loaded.keys() | _prefetched
    return sorted(n for n in names if not engine.runtime_cached(_tag(n)))


def prefetch(names):
    """Emit the IR of `names` (pieces from `to_compile`) here and compile them
    on a background thread, with a short GIL switch interval (see
    `switch_interval`). Emitting is Python, which would only share the GIL with
    the caller's work on that thread and reach LLVM later."""
    if names:
        _prefetched.update(names)
        texts = {}
        for name in names:
            fname, suffix = _NAME.match(name).groups()
            if (fname, suffix) not in texts:
                texts[fname, suffix] = _emit(fname, suffix)
        text_of = {name: texts[_NAME.match(name).groups()] for name in names}
        switch_interval.compile_in_background(_resolve_all, [(names, text_of)],
                                              "fgrad math runtime")


def _resolve_all(names, text_of):
    """Load `names` one after the other, the lock held throughout (so that the
    program's thread, waiting for it, does not compile the last ones itself)."""
    with lock:
        for name in names:
            resolve(name, text_of[name])


def _pieces(name, dtype, shape):
    """The pieces sin or cos (`name`) of a `dtype` array of `shape` likely calls,
    as LLVM's loop vectoriser splits a loop over its n elements:
    the variant of the host's widest vectors over as many of them as it holds
    (a long loop's own copy of it, `mathlib.inline_trig_variants`, calls
    `_ph`), narrower variants over what is left, widest first, the scalar
    function for the last ones. A guess (the program loads what it calls):
    a wrong one costs a compile on the background thread."""
    suffix = _SUFFIX.get(dtype)
    if suffix is None:
        return []
    fname = f"fgrad_{name}_{suffix}"
    n = math.prod(shape)
    widest = min(max(WIDTHS[suffix]), engine.vector_bits_hint() // (32 if suffix == "f32" else 64))
    pieces = []
    if n >= INLINE_TRIG_ELEMENTS:
        pieces.append(f"{fname}_ph")
    elif n >= widest:
        pieces.append(f"{fname}_v{widest}")
    rest = n % widest
    for width in sorted(WIDTHS[suffix], reverse=True):
        if width < widest and rest >= width:
            pieces.append(f"{fname}_v{width}")
            rest -= width
    return pieces + [fname] * (rest > 0)


def symbols(name, suffix):
    """The functions the shared code of sin or cos exports: the scalar function,
    its vector variants, then the scalar slow path (what a variant that a
    program defines itself calls for the lanes beyond its fast path)."""
    fname = f"fgrad_{name}_{suffix}"
    return [fname] + [f"{fname}_v{n}" for n in WIDTHS[suffix]] + [f"{fname}_ph"]


def _tag(piece):
    return f"math {piece}"


def _emit(name, suffix):
    from . import mathlib   # (only when not in the disk cache: it imports llvmlite.ir)
    return mathlib.emit_runtime(name, suffix)


def _load(piece, name, suffix, text=None):
    def emit():
        return _piece_text(_emit(name, suffix) if text is None else text, piece, name, suffix)
    module = engine.compile_runtime(_tag(piece), [piece], emit, export=True)
    engine.add_symbol(piece, module.address(piece))
    return module


def _piece_text(text, piece, name, suffix):
    """The IR `text` of sin or cos's runtime module with each exported function
    but `piece` made internal: optimisation keeps what `piece` calls, drops
    the rest (a text edit: a parsed module's functions would each cost a call
    into LLVM, each waiting for the GIL while the program's thread runs)."""
    for other in symbols(name, suffix):
        if other != piece:
            text, found = re.subn(rf'^define (?=[^@\n]*@"{other}"\()', "define internal ",
                                  text, count=1, flags=re.M)
            if not found:
                raise ValueError(f"{other} is not defined in its runtime module")
    return text


engine.add_resolver(resolve)
