"""`fgrad.jit`: trace once per cache key, then run the compiled program.

The cache key is the tree structure of the dynamic arguments, the static
argument values (by type and value: 1, 1.0 and True, or 0.0 and -0.0, are
different programs; see value_keys), each leaf's (shape, dtype, weak type) and
the default float (a program traced with float32 defaults is not run under a
float64 default: fgrad.default_float). Called at the top
level, a cache hit runs the compiled program directly; under a transform the
call binds the `jit` primitive, whose rules transform the traced program.
"""
import collections
import functools
import inspect
from typing import NamedTuple

import numpy as np
import optree

from .. import core, placement, tree_util
from ..config import config
from ..cpu import dispatch, interrupts, mpi, outputs
from ..cpu.dispatch import MISS
from ..core import Array, Tracer, full_lower
from ..debug.nans import check_program
from ..debug.tracebacks import api_boundary, with_filtered_traceback
from .. import default_float as _default_float
from ..default_float import default_float_dtype, scoped_or
from ..jaxpr import ClosedJaxpr, Jaxpr
from ..partial_eval import trace_to_jaxpr
from ..value_keys import StaticValue
from .donation import DonatedBuffer, invalidate, private_donated
from .log import log_trace
from .primitive import compile_jaxpr, jit_p


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    entries: int


class _Entry:
    """A traced program: its jaxpr (inputs: hoisted tracer constants, then the flat
    dynamic arguments), the output tree, and the hoisted values."""
    __slots__ = ("jaxpr", "out_tree", "hoisted", "executable", "donated", "runs", "fast",
                 "used")

    def __init__(self, jaxpr, out_tree, hoisted, donated=()):
        self.jaxpr, self.out_tree, self.hoisted = jaxpr, out_tree, hoisted
        self.executable = None
        self.donated = donated   # positions of the flat arguments that are donated
        self.runs = 0            # calls with flat array arguments, before `fast` is tried
        self.fast = None         # the native call path (cpu.dispatch); False: not eligible
        self.used = 0            # when it last ran through Python (Jitted._tick)


def _compile(entry, name):
    """The entry's Executable (donation off while debug_nans re-runs programs)."""
    return compile_jaxpr(entry.jaxpr, name, entry.donated if not config.debug_nans else ())


def jit(fun=None, *, static_argnums=(), static_argnames=(), donate_argnums=()):
    """Compile `fun`; usable as @jit or @jit(static_argnames=...).

    static_argnums/static_argnames: arguments that are Python values baked into the
    program (hashable; a new value compiles again).

    donate_argnums: positional arguments whose memory the program may reuse for
    outputs of the same shape and dtype (a parameter update then runs in place).
    After the call a donated fgrad Array is used up (reading it raises an error
    saying so) and a donated NumPy array's contents are unspecified. An Array's
    memory is reused only when nothing else can observe it (no other Array, view
    or NumPy array of it is alive; see jit/donation.py), else the program writes
    into a copy. Donation is ignored under transforms and with debug_nans on.
    """
    if fun is None:
        return lambda f: jit(f, static_argnums=static_argnums, static_argnames=static_argnames,
                             donate_argnums=donate_argnums)
    return Jitted(fun, static_argnums, static_argnames, donate_argnums)


def _as_tuple(x):
    if x is None:
        return ()
    return (x,) if isinstance(x, (int, str)) else tuple(x)


class Jitted:
    """A jit-compiled function; see `jit`."""

    def __init__(self, fun, static_argnums, static_argnames, donate_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self._name = getattr(fun, "__name__", type(fun).__name__)
        self._donated_marker = DonatedBuffer(self._name)
        try:
            self._params = list(inspect.signature(fun).parameters.values())
        except (TypeError, ValueError):
            self._params = []
        positional = [p.name for p in self._params
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        nums = set(_as_tuple(static_argnums))
        names = set(_as_tuple(static_argnames))
        self._check_static_spec(nums, names)
        nums |= {positional.index(n) for n in names if n in positional}
        names |= {positional[i] for i in nums if 0 <= i < len(positional)}
        self._static_nums, self._static_names = nums, names
        self._positional = positional
        self._donate = self._check_donate_spec(set(_as_tuple(donate_argnums)), nums)
        self._cache = {}         # at most config.jit_cache_size entries (see _evict)
        self._fast = None        # the native call path of the entry run last (see _try_fast)
        self._fast_default = None  # the default float that entry was traced under
        self._tick = 0           # counts runs through Python, for _Entry.used
        self._flat_trees = {}
        self._hits = self._misses = 0
        self._miss_log = collections.deque(maxlen=_MISS_LOG)

    def _check_donate_spec(self, donate, static_nums):
        """Donated positions: ints naming dynamic positional arguments."""
        if any(not isinstance(i, int) for i in donate):
            raise TypeError(f"jit of {self._name}: donate_argnums must be ints (positions of "
                            f"positional arguments), got {sorted(map(repr, donate))}")
        both = sorted(i for i in donate if i in static_nums)
        if both:
            raise ValueError(f"jit of {self._name}: arguments {both} are both static and "
                             f"donated; a static argument has no buffer to donate")
        return donate

    def _check_static_spec(self, nums, names):
        """Static arguments must exist (when the signature says what exists)."""
        kinds = {p.kind for p in self._params}
        if not self._params:
            return
        positional = [p for p in self._params
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if inspect.Parameter.VAR_POSITIONAL not in kinds:
            bad = sorted(i for i in nums if not -len(positional) <= i < len(positional))
            if bad:
                raise ValueError(f"jit of {self._name}: static_argnums {bad} out of range for "
                                 f"a function with {len(positional)} positional parameters")
        if inspect.Parameter.VAR_KEYWORD not in kinds:
            known = {p.name for p in self._params if p.kind != p.VAR_POSITIONAL}
            bad = sorted(n for n in names if n not in known)
            if bad:
                raise ValueError(f"jit of {self._name}: static_argnames {bad} name no "
                                 f"parameter; its parameters are {sorted(known)}")

    # -- calling ---------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True  # noqa: F841 -- pytest: do not show this frame
        fast = self._fast
        if fast is not None and not kwargs and (
                _default_float_fixed or scoped_or(config.default_float) is self._fast_default):
            out = fast(*args)     # checks the arguments natively; MISS: not served
            if out is not MISS:
                return out
            interrupts.raise_pending()   # the call stopped for a signal: not again
        try:
            return self._call(args, kwargs)
        except Exception as e:
            if not config.traceback_filtering:
                raise
            raise with_filtered_traceback(e)

    def _call(self, args, kwargs):
        if config.disable_jit:
            return self.fun(*args, **kwargs)
        if not kwargs and not self._static_nums and core.current_trace() is core.eval_trace:
            # The fast path: concrete arrays only, no static arguments.
            flat_args = all(type(a) in _FLAT_LEAF for a in args)   # no containers
            if flat_args:
                leaves, tree = args, self._flat_tree(len(args))
            else:
                leaves, tree = tree_util.flatten((args, _NO_KWARGS))  # the general path's tree
            raw, key = _raw_leaves(leaves)
            if raw is not None:
                entry = self._cache.get((tree, (), key, default_float_dtype()))
                if entry is not None:
                    self._hits += 1
                    self._tick += 1
                    entry.used = self._tick
                    outs = self._run(entry, raw, leaves)
                    if flat_args and entry.fast is None:
                        self._try_fast(entry)
                    return outs
                raw = None    # a reference to a value would keep a donation from reusing it
        entry, flat = self._lookup(args, kwargs)
        if core.current_trace() is core.eval_trace and not entry.hoisted:
            return self._run(entry, [x._value if type(x) is Array else x for x in flat], flat)
        outs = jit_p.bind(*entry.hoisted, *flat, jaxpr=entry.jaxpr, name=self._name)
        return tree_util.unflatten(entry.out_tree, outs)

    def _try_fast(self, entry):
        """From an entry's second call with flat array arguments on, serve its calls
        through the native call path when its program allows (cpu.dispatch)."""
        entry.runs += 1
        if entry.runs < 2 or entry.executable is None:
            return
        entry.fast = False
        found = None if entry.hoisted or entry.donated else entry.executable.native_call()
        if found is None:
            return
        native, call_map, constants = found
        exe, n_out = entry.executable, len(entry.executable.out_refs)
        sizes = [v.aval.size * v.aval.dtype.itemsize for v in entry.jaxpr.jaxpr.invars]
        sizes += [c.nbytes for c in constants if c is not None]
        sizes += [a.aval.size * a.aval.dtype.itemsize for a in entry.jaxpr.jaxpr.outvars]
        # a program that is one collective waits on the other ranks rather than
        # computing, with the GIL released (cpu.mpi): the native path at any size
        eqns = entry.jaxpr.jaxpr.eqns
        collective = len(eqns) == 1 and eqns[0].primitive.name in mpi.NAMES
        if n_out == 0 or sum(sizes) > dispatch.MAX_BYTES and not collective:
            return
        if entry.out_tree == tree_util.structure(0):
            finish, as_tuple = None, False
        elif entry.out_tree == tree_util.structure((0,) * n_out):
            finish, as_tuple = None, True
        else:
            finish, as_tuple = functools.partial(tree_util.unflatten, entry.out_tree), True
        in_avals = [(v.aval.shape, v.aval.dtype, v.aval.weak_type)
                    for v in entry.jaxpr.jaxpr.invars]
        out_avals = [(v.aval.shape, v.aval.dtype, w)
                     for v, w in zip(entry.jaxpr.jaxpr.outvars, exe.out_weak)]
        allocate = outputs.allocator([(shape, dt) for shape, dt, _ in out_avals], collective)
        entry.fast = dispatch.fast_function(native, in_avals, call_map, constants, out_avals,
                                            finish, as_tuple, exe, self._name, allocate) or False
        if entry.fast:
            self._fast = entry.fast
            self._fast_default = default_float_dtype()

    def _flat_tree(self, n):
        """The tree structure of (n arrays, no keywords), as the general path builds it."""
        tree = self._flat_trees.get(n)
        if tree is None:
            tree = self._flat_trees[n] = tree_util.structure(((0,) * n, _NO_KWARGS))
        return tree

    def _run(self, entry, raw, leaves):
        device = placement.on_device(raw) if placement.array_types else None
        if device is not None:
            return self._run_on_device(device, entry, raw, leaves)
        exe = entry.executable
        if exe is None:
            exe = entry.executable = _compile(entry, self._name)
        if entry.donated and not config.debug_nans:
            raw = private_donated(raw, leaves, entry.donated)
        raw_outs = exe(*raw)
        if entry.donated and not config.debug_nans:
            invalidate(leaves, entry.donated, self._donated_marker)
        if config.debug_nans:
            check_program(entry.jaxpr, raw, raw_outs, self._name)
        outs = [Array(o, w) for o, w in zip(raw_outs, exe.out_weak)]
        return tree_util.unflatten(entry.out_tree, outs)

    def _run_on_device(self, device, entry, raw, leaves):
        """Run on the device backend that holds the inputs (e.g. fgrad._src.gpu)."""
        exe = device.compile(entry.jaxpr, self._name)
        raw_outs = exe(*raw)
        if entry.donated and not config.debug_nans:
            invalidate(leaves, entry.donated, self._donated_marker)
        outs = [Array(o, w) for o, w in zip(raw_outs, exe.out_weak)]
        return tree_util.unflatten(entry.out_tree, outs)

    def _split(self, args, kwargs):
        nargs = len(args)
        static_nums = {i % nargs for i in self._static_nums if -nargs <= i < nargs}
        statics = []
        for i in sorted(static_nums):
            statics.append(("arg", i, _check_hashable(self._describe(i), args[i])))
        for k in sorted(kwargs):
            if k in self._static_names:
                statics.append(("kw", k, _check_hashable(f"argument {k!r}", kwargs[k])))
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static_nums)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self._static_names}
        return tuple(statics), static_nums, dyn_args, dyn_kwargs

    def _lookup(self, args, kwargs):
        statics, static_nums, dyn_args, dyn_kwargs = self._split(args, kwargs)
        leaves, tree = tree_util.flatten((dyn_args, dyn_kwargs))
        flat = [_as_array(x, self._name) for x in leaves]
        key = (tree, statics, tuple(_leaf_key(x) for x in flat), default_float_dtype())
        entry = self._cache.get(key)
        if entry is not None:
            self._hits += 1
            self._tick += 1
            entry.used = self._tick
            return entry, flat
        self._misses += 1
        reason = self._explain_miss(key, dyn_args, dyn_kwargs, static_nums)
        self._miss_log.append(reason)
        log_trace(self._name, reason)
        entry = self._trace(args, kwargs, static_nums, tree, flat, dyn_args, dyn_kwargs)
        if not entry.hoisted:
            self._evict(config.jit_cache_size - 1)
            self._tick += 1
            entry.used = self._tick
            self._cache[key] = entry
        return entry, flat

    def _evict(self, keep):
        """Drop the least recently run entries until at most `keep` remain (the one
        the native call path serves counts as the most recent)."""
        if len(self._cache) <= keep:
            return
        fast = self._fast
        entries = list(self._cache.items())     # a snapshot: other threads may call meanwhile
        entries.sort(key=lambda kv: float("inf") if fast is not None and kv[1].fast is fast
                     else kv[1].used)
        for k, entry in entries[:len(entries) - keep]:
            self._cache.pop(k, None)
            if fast is not None and entry.fast is fast:
                self._fast = None

    def _trace(self, args, kwargs, static_nums, tree, flat, dyn_args, dyn_kwargs):
        out_tree = []

        def flat_fun(*xs):
            d_args, d_kwargs = tree_util.unflatten(tree, xs)
            it = iter(d_args)
            full = [args[i] if i in static_nums else next(it) for i in range(len(args))]
            merged = {k: (kwargs[k] if k in self._static_names else d_kwargs[k]) for k in kwargs}
            out_leaves, t = tree_util.flatten(self.fun(*full, **merged))
            out_tree.append(t)
            return [full_lower(x) for x in out_leaves]

        names = self._leaf_names(dyn_args, dyn_kwargs, static_nums)
        closed = trace_to_jaxpr(flat_fun, [x.aval if isinstance(x, Tracer) else
                                           core.get_aval(x) for x in flat],
                                f"jit of {self._name}", arg_names=names)
        jaxpr, hoisted = _hoist_traced_consts(closed)
        return _Entry(jaxpr, out_tree[0], hoisted, self._donated_leaves(args, static_nums))

    def _donated_leaves(self, args, static_nums):
        """Positions among the flat dynamic arguments of the donated ones' leaves."""
        if not self._donate:
            return ()
        nargs = len(args)
        donate = {i % nargs for i in self._donate if -nargs <= i < nargs}
        out, at = [], 0
        for i, a in enumerate(args):
            if i in static_nums:
                continue
            n = len(tree_util.leaves(a))
            if i in donate:
                out.extend(range(at, at + n))
            at += n
        return tuple(out)

    # -- introspection ---------------------------------------------------------
    @api_boundary
    def lower(self, *args, **kwargs):
        """Trace (without running) for these arguments; see Lowered."""
        entry, flat = self._lookup(args, kwargs)
        device = placement.on_device([x._value for x in flat if type(x) is Array])
        return Lowered(self, entry, device)

    def cache_info(self):
        """Hits, misses and cached programs of this function."""
        native = sum(dispatch.hits(e.fast) for e in self._cache.values() if e.fast)
        return CacheInfo(self._hits + native, self._misses, len(self._cache))

    def cache_misses(self):
        """Why each miss traced again (a list of sentences, oldest first; the most
        recent 1000)."""
        return list(self._miss_log)

    def clear_cache(self):
        """Drop every compiled program of this function (their memory and native code
        are freed once nothing else, a Lowered say, holds them)."""
        self._cache.clear()
        self._fast = None

    def _describe(self, i):
        if i < len(self._positional):
            return f"argument {self._positional[i]!r}"
        return f"argument {i}"

    def _leaf_names(self, dyn_args, dyn_kwargs, static_nums):
        """Per dynamic leaf: (a readable name such as "params['w']", and how to make it
        static: a parameter name for static_argnames or a position for static_argnums)."""
        positions = [i for i in range(len(dyn_args) + len(static_nums)) if i not in static_nums]
        varargs = next((p.name for p in self._params if p.kind == p.VAR_POSITIONAL), "args")
        paths, _, _ = optree.tree_flatten_with_path((dyn_args, dyn_kwargs), none_is_leaf=False,
                                                    namespace=tree_util.NAMESPACE)
        names = []
        for path in paths:
            if path[0] == 0:
                i = positions[path[1]]
                if i < len(self._positional):
                    head = hint = self._positional[i]
                else:
                    head, hint = f"{varargs}[{i - len(self._positional)}]", i
                rest = path[2:]
            else:
                head = hint = str(path[1])
                rest = path[2:]
            names.append((head + "".join(f"[{p!r}]" for p in rest), hint))
        return names

    def _explain_miss(self, key, dyn_args, dyn_kwargs, static_nums):
        if not self._cache:
            return "first call"
        tree, statics, avals, default = key
        defaults = {k[3] for k in self._cache}
        if default not in defaults:
            return (f"the default float changed: {', '.join(sorted(map(str, defaults)))} -> "
                    f"{default} (fgrad.default_float / config.default_float)")
        same_tree = [k for k in self._cache if k[0] == tree]
        if not same_tree:
            return (f"the arguments' structure changed: {tree} (cached: "
                    f"{next(iter(self._cache))[0]})")
        same_statics = [k for k in same_tree if k[1] == statics]
        if not same_statics:
            old = dict(((kind, k), v) for kind, k, v in same_tree[-1][1])
            changes = [f"{'argument ' + repr(k) if kind == 'kw' else self._describe(k)} "
                       f"{old.get((kind, k), '<absent>')!r} -> {v!r}" for kind, k, v in statics
                       if old.get((kind, k), object()) != v]
            return "a new static value: " + ", ".join(changes or ["static arguments changed"])
        previous = same_statics[-1][2]
        names = self._leaf_names(dyn_args, dyn_kwargs, static_nums)
        changes = [f"{n}: {_fmt(o)} -> {_fmt(a)}" for (n, _), o, a in zip(names, previous, avals)
                   if o != a]
        return "new shapes/dtypes: " + ", ".join(changes)


class Lowered:
    """A traced jitted function: `.jaxpr`, `.as_text()` (the compiled program) and
    `.compile()`."""

    def __init__(self, jitted, entry, device=None):
        self._jitted, self._entry = jitted, entry
        self.jaxpr = entry.jaxpr
        self._device = device   # the inputs' backend, None on the host (as_text shows its program)

    def compile(self):
        if self._entry.executable is None:
            self._entry.executable = _compile(self._entry, self._jitted._name)
        return self._jitted

    def as_text(self):
        if self._device is not None:
            return self._device.compile(self._entry.jaxpr, self._jitted._name).as_text()
        return _compile(self._entry, self._jitted._name).as_text()


def _fmt(leaf_key):
    shape, dtype, weak = leaf_key
    from ..dtypes import short_name
    return f"{short_name(dtype)}[{','.join(map(str, shape))}]" + (" (weak)" if weak else "")


_SUPPORTED = None
_default_float_fixed = True  # no one has changed the default float (yet)


def _default_float_changes():
    global _default_float_fixed
    _default_float_fixed = False


_default_float.on_first_change(_default_float_changes)
_NO_KWARGS = {}
_MISS_LOG = 1000         # reasons kept by cache_misses (the most recent)


_FLAT_LEAF = (np.ndarray, Array)


def _supported():
    """The dtypes fgrad computes in (imported on first use)."""
    global _SUPPORTED
    if _SUPPORTED is None:
        from ..dtypes import SUPPORTED
        _SUPPORTED = SUPPORTED
    return _SUPPORTED


def _raw_leaves(leaves):
    """(NumPy values, cache-key part) when every leaf is a concrete array of a
    supported dtype; (None, None) otherwise (the general path handles the rest)."""
    _supported()
    raw, key = [], []
    for x in leaves:
        t = type(x)
        if t is Array:
            v = x._value
            raw.append(v)
            key.append((v.shape, v.dtype, x.weak_type))
        elif t is np.ndarray and x.dtype in _SUPPORTED:
            raw.append(x)
            key.append((x.shape, x.dtype, False))
        else:
            return None, None
    return raw, tuple(key)


def _leaf_key(x):
    if type(x) is Array:
        v = x._value
        return (v.shape, v.dtype, x.weak_type)
    a = x.aval
    return (a.shape, a.dtype, a.weak_type)


def _check_hashable(what, value):
    """`value` as a cache-key part (a StaticValue: same type and value, see value_keys)."""
    try:
        return StaticValue(value)
    except TypeError:
        raise TypeError(f"jit: static {what} must be hashable, got a {type(value).__name__}: "
                        f"{value!r}\n  hint: pass a tuple instead of a list, or make the "
                        f"argument dynamic (an array)") from None


def _as_array(x, fname):
    if isinstance(x, (Array, Tracer)):
        return x
    if type(x) is np.ndarray and x.dtype in _supported() \
            and core.current_trace() is core.eval_trace:
        # not copied: a top-level call only reads it (outputs that would alias it
        # are copied by the Executable); under a transform it may become a constant
        return Array(x)
    if isinstance(x, (np.ndarray, np.generic, bool, int, float)):
        return full_lower(x)
    if placement.platform_of(x) is not None:
        return Array(x)
    raise TypeError(
        f"jit of {fname}: an argument holds a {type(x).__name__} ({x!r:.60}), which is "
        f"not an array.\n  hint: mark that argument static (static_argnums / "
        f"static_argnames) so its value is part of the compiled program")


def _hoist_traced_consts(closed):
    """Constants that are tracers of enclosing transforms become leading inputs."""
    jaxpr = closed.jaxpr
    keep = [(v, c) for v, c in zip(jaxpr.constvars, closed.consts) if not isinstance(c, Tracer)]
    hoist = [(v, c) for v, c in zip(jaxpr.constvars, closed.consts) if isinstance(c, Tracer)]
    new = Jaxpr([v for v, _ in keep], [v for v, _ in hoist] + jaxpr.invars, jaxpr.eqns,
                jaxpr.outvars)
    return ClosedJaxpr(new, [c for _, c in keep]), [c for _, c in hoist]
