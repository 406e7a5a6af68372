"""A program's fingerprint: a digest of everything its native code depends on.

The CPU backend's disk cache is keyed by the LLVM IR text, which costs as much
to emit as a new process spends on everything else to run a cached program.
The fingerprint names the program before any IR exists: the simplified closed
jaxpr written out canonically (equations, types, params, literal and constant
values), the compile options, fgrad's own source code and the host. The
backend remembers, under the fingerprint, which compiled object the program
became, so a new process loads it without emitting IR.

Params of a type the encoder does not know (a Python callback, say) give no
fingerprint: such a program is always emitted, never looked up by a guess.
"""
import functools
import hashlib
import os

import numpy as np

from ..core import ShapedArray
from ..jaxpr import ClosedJaxpr, Jaxpr, Literal


class _Unknown(Exception):
    """A value the encoder cannot write out faithfully."""


def fingerprint(closed, *options):
    """Hex digest of `closed` (a simplified ClosedJaxpr) and the compile options
    (strings, numbers, tuples), or None when some param cannot be encoded."""
    sources = source_digest()
    if sources is None:
        return None
    h = _Encoding()
    h.text.append(sources)
    try:
        _closed(h, closed)
        _value(h, options)
    except _Unknown:
        return None
    return h.hexdigest()


class _Encoding:
    """The bytes a fingerprint hashes: each part's text and a NUL, arrays' raw
    bytes, gathered and hashed at once (two hash updates a part cost a
    1000-equation program 2 ms). `avals`: each aval's text, written once."""
    __slots__ = ("text", "chunks", "avals")

    def __init__(self):
        self.text, self.chunks, self.avals = [], [], {}

    def raw(self, data):
        self.chunks.append("".join(self.text).encode())
        self.text.clear()
        self.chunks.append(data)

    def hexdigest(self):
        self.raw(b"")
        return hashlib.sha256(b"".join(self.chunks)).hexdigest()


@functools.lru_cache(maxsize=None)
def source_digest():
    """Digest of fgrad's Python sources (the compiler that turns jaxprs into IR),
    or None when they are not there to read, or cannot be read (then nothing is
    looked up by fingerprint: a digest of nothing would not change with the
    compiler). (`os.walk` and `open`: a third cheaper than `Path.rglob` and
    `read_bytes` on the ~200 files, in every process's first compile.)"""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    h = hashlib.sha256()
    try:
        paths = sorted(os.path.join(d[len(root) + 1:], name)
                       for d, _, names in os.walk(root, onerror=_raise)
                       for name in names if name.endswith(".py"))
        if not any(os.path.basename(p) == "fingerprint.py" for p in paths):
            return None
        for path in paths:
            h.update(path.encode())
            with open(os.path.join(root, path), "rb") as f:
                h.update(f.read())
    except OSError:             # a source that cannot be read: no digest, as with none
        return None
    return h.hexdigest()


def _raise(error):
    raise error


def _put(h, *parts):
    for p in parts:
        h.text.append(f"{p!s}\0")


def _closed(h, closed):
    _put(h, "closed", len(closed.consts))
    for c in closed.consts:
        _array(h, np.asarray(c))
    _jaxpr(h, closed.jaxpr)


def _jaxpr(h, jaxpr):
    ids = {}
    text = h.text

    def define(v):
        ids[v] = len(ids)
        _aval(h, v.aval)

    def atom(a):
        if type(a) is Literal:
            text.append("lit\0")
            _aval(h, a.aval)
            _array(h, np.asarray(a.val))
        else:
            text.append(f"var\0{ids[a]!s}\0")

    _put(h, "jaxpr", len(jaxpr.constvars), len(jaxpr.invars), len(jaxpr.eqns))
    for v in jaxpr.constvars + jaxpr.invars:
        define(v)
    for eqn in jaxpr.eqns:
        text.append(f"eqn\0{eqn.primitive.name!s}\0{len(eqn.invars)}\0{len(eqn.outvars)}\0")
        for a in eqn.invars:
            atom(a)
        if eqn.params:
            _value(h, eqn.params)
        else:
            text.append("dict\0" "0\0")      # (as _value writes {})
        for v in eqn.outvars:
            define(v)
    _put(h, "out", len(jaxpr.outvars))
    for a in jaxpr.outvars:
        atom(a)


def _aval(h, aval):
    written = h.avals.get(aval)     # (equal avals: equal shapes, dtypes and weak types)
    if written is None:
        written = h.avals[aval] = (f"aval\0{tuple(aval.shape)!s}\0{np.dtype(aval.dtype).str}\0"
                                   f"{bool(aval.weak_type)}\0")
    h.text.append(written)


def _array(h, a):
    _put(h, "array", a.dtype.str, a.shape)
    h.raw(np.ascontiguousarray(a).tobytes())


def _value(h, v):
    """A param value, with its type, so that equal encodings mean equal values."""
    t = type(v)
    if v is None or t in (bool, int, float, str, complex):
        _put(h, t.__name__, repr(v))
    elif t is tuple or t is list or isinstance(v, tuple):   # NamedTuples too
        _put(h, t.__qualname__, len(v))
        for x in v:
            _value(h, x)
    elif t is dict:
        _put(h, "dict", len(v))
        for k in sorted(v, key=repr):
            _value(h, k)
            _value(h, v[k])
    elif t is frozenset:
        _put(h, "frozenset", len(v))
        for x in sorted(v, key=repr):
            _value(h, x)
    elif isinstance(v, np.dtype):
        _put(h, "dtype", v.str)
    elif isinstance(v, (np.ndarray, np.generic)):
        _array(h, np.asarray(v))
    elif t is ClosedJaxpr:
        _closed(h, v)
    elif t is Jaxpr:
        _jaxpr(h, v)
    elif t is ShapedArray:
        _aval(h, v)
    elif isinstance(v, type) and issubclass(v, np.generic):
        _put(h, "scalar type", np.dtype(v).str)
    else:
        raise _Unknown(t)
