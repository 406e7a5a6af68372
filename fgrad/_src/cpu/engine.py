"""The LLVM side of the CPU backend, independent of fgrad's own IR.

`compile_module(text, entries)` parses LLVM IR text, optimises it for the
host CPU (O3 with loop and SLP vectorisation; none where a function asks
`CODEGEN_ONLY`), compiles it and returns a
`CompiledModule` exposing function addresses and ctypes callables for entry
points of the form ``void entry(int64_t* argtable)``.

Where a system linker (`ld`) exists and every external function the module
declares is visible to the dynamic linker (libc, the Python C API, NumPy's
OpenBLAS once `blas` made it global), the object is linked into a shared
library and loaded with dlopen; otherwise (or when linking fails) MCJIT
compiles and loads it, resolving the symbols given to `add_symbol`.

Compiled code is cached on disk (`disk_cache`: `<key>.so` or `<key>.o`),
keyed on the IR text, the llvmlite version, the host CPU and
`ENGINE_VERSION`. A hit on a shared library loads it without LLVM: llvmlite's
binding (about 60 ms to import) is imported only to compile, and the key
names the CPU by /proc/cpuinfo's identification and flags where there is one
(LLVM's view of the CPU, detected afresh in each process that compiles, is
never read back from disk), so a new process that finds its programs in the
cache never loads LLVM. A hit on an object loads it into a fresh MCJIT engine
through the object-cache hook, so neither optimisation nor code generation
runs.

Code fgrad shares between programs (sin and cos, the loops' signal polling)
is compiled once by `compile_runtime(..., export=True)`, its symbols global;
a program only declares it. `add_resolver` tells the engine which declared
names are such code, loaded before a module that declares them is compiled or
loaded; an alias records them (`needs`), checked against the resolvers.

`_lock` (`compiler_lock.lock`) serialises every use of LLVM and is held
across fork(): a child never starts with LLVM's own locks held by a thread it
does not have, and fork() waits while another thread compiles.

Facts about llvmlite 0.50 this relies on (see the project's cpu-codegen
notes): the legacy pass manager is gone and `llvm.initialize()` raises;
MCJIT takes ownership of the TargetMachine it is given, so every engine gets
its own fresh one.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import llvmlite

from . import disk_cache, scratch
from .compiler_lock import lock

__all__ = [
    "ENGINE_VERSION", "CompileError", "CompileStats", "CompiledModule",
    "initialize", "host_cpu", "host_target_machine", "host_has_feature", "host_triple",
    "host_vector_bits",
    "compile_module", "optimized_ir", "optimized_asm", "add_symbol", "add_resolver",
    "default_cache_dir", "cache_key",
]

#: Bump whenever the compilation pipeline changes in a way that changes code.
ENGINE_VERSION = "16"

#: A function attribute (string, "true"): with `alwaysinline`, calls to the
#: function that optimisation made (the vectoriser's calls of a vector variant)
#: are inlined after it.
LATE_INLINE = "fgrad-late-inline"

#: A function attribute (string, "true"): a module with such a function skips
#: the IR optimisation pipeline and goes straight to code generation (its IR is
#: already what the code should be: a hand-blocked kernel, `lane_product`).
CODEGEN_ONLY = "fgrad-codegen-only"

# LLVM's global context and the pass pipelines are not thread-safe: every use of
# LLVM holds this lock (also held across fork(): see compiler_lock).
_lock = lock

_initialized = False
_symbols: dict[str, int] = {}      # add_symbol's names and addresses
_registered: set[str] = set()      # ... of which LLVM has been told
_resolvers: list = []              # add_resolver's functions


class CompileError(RuntimeError):
    """LLVM rejected the IR (parse or verification error) or an entry is missing."""


def _binding():
    """llvmlite.binding (LLVM itself), loaded on first use."""
    import llvmlite.binding as llvm
    return llvm


def initialize() -> None:
    """Initialise LLVM's native target and asm printer (idempotent)."""
    global _initialized
    if _initialized:
        return
    with _lock:
        if not _initialized:
            llvm = _binding()
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _initialized = True


def _cpu_fingerprint() -> str | None:
    """A digest of this CPU's identification and flags (Linux), else None: what
    LLVM's view of the CPU is made from, read without LLVM."""
    lines = []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:                # the first processor's block only
                if not line.strip():
                    break
                lines.append(line)
    except OSError:
        return None
    keep = ("vendor_id", "cpu family", "model", "model name", "stepping", "flags")
    lines = [ln.rstrip("\n") for ln in lines if ln.split(":", 1)[0].strip() in keep]
    if not lines:
        return None
    h = hashlib.sha256("\n".join([platform.machine(), llvmlite.__version__] + lines).encode())
    return h.hexdigest()[:32]


@functools.lru_cache(maxsize=None)
def _host() -> tuple[str, str, str]:
    """LLVM's (CPU name, feature string, process triple) for this host, asked of
    LLVM in each process (a description read back from disk could claim
    features the CPU lacks)."""
    with _lock:
        initialize()
        llvm = _binding()
        name = llvm.get_host_cpu_name()
        try:
            features = llvm.get_host_cpu_features().flatten()
        except RuntimeError:        # not available on some platforms
            features = ""
        return name, features, llvm.get_process_triple()


@functools.lru_cache(maxsize=None)
def _host_identity() -> str:
    """What compiled code depends on about this machine, for cache keys: the CPU's
    /proc/cpuinfo fingerprint (no LLVM needed), else LLVM's view of it."""
    fingerprint = _cpu_fingerprint()
    if fingerprint is not None:
        return f"cpuinfo {fingerprint}"
    name, features, triple = _host()
    return f"llvm {triple} {name} {features}"


def host_cpu() -> tuple[str, str]:
    """(CPU name, flattened feature string) of the host."""
    return _host()[:2]


def host_triple() -> str:
    """The LLVM target triple of this process (e.g. x86_64-unknown-linux-gnu)."""
    return _host()[2]


def host_has_feature(feature: str) -> bool:
    """Whether the host CPU has `feature` (LLVM spelling, e.g. 'avx2', 'fma')."""
    return ("+" + feature) in host_cpu()[1].split(",")


def host_vector_bits() -> int:
    """The widest vectors the loop vectoriser uses here (x86: 512 with AVX-512,
    see `host_target_machine`, 256 with AVX; 128 elsewhere)."""
    if not host_triple().startswith(("x86_64", "i386", "i686")):
        return 128
    return 512 if host_has_feature("avx512f") else 256 if host_has_feature("avx") else 128


def host_target_machine(opt: int = 3) -> "llvmlite.binding.TargetMachine":
    """A fresh TargetMachine for the host CPU (never share one between engines).

    On AVX-512 hosts LLVM's tuning for recent Intel cores keeps vector loops at
    256 bits (`prefer-256-bit`); we turn that off: the fused element-wise
    kernels run 12-15% faster with 512-bit vectors on this project's machines
    (sin·y + exp(-x²), 1e6 and 1e7 float32 elements)."""
    return _target_machine(opt, jit=True)


@functools.lru_cache(maxsize=None)
def _kept_target_machine(opt: int, pic: bool = False):
    """One TargetMachine per (opt, pic) for the pass pipelines, data layouts and
    `emit_object` (used under the lock; never given to an MCJIT engine, which
    would take it over): creating one costs about 0.3 ms a use."""
    if pic:
        return _target_machine(opt, jit=False, reloc="pic", codemodel="default")
    return _target_machine(opt, jit=True)


def _target_machine(opt, jit, reloc="default", codemodel="jitdefault"):
    initialize()
    name, features = host_cpu()
    if "+avx512f" in features.split(","):
        features += ",-prefer-256-bit"
    llvm = _binding()
    target = llvm.Target.from_triple(host_triple())
    return target.create_target_machine(cpu=name, features=features, opt=opt, jit=jit,
                                        reloc=reloc, codemodel=codemodel)


def add_symbol(name: str, address: int) -> None:
    """Make `name` resolve to `address` in compiled code (e.g. a BLAS routine).
    A module declaring a name the dynamic linker resolves differently (or not
    at all) is loaded by MCJIT rather than as a shared library."""
    _symbols[name] = int(address)


def add_resolver(resolve) -> None:
    """`resolve(name)` loads the code defining `name` (and add_symbol's it) when it
    is one of fgrad's shared run-time functions, and says whether it is: asked
    for every function a module declares, before the module is compiled or
    loaded (see `mathlib_runtime`)."""
    _resolvers.append(resolve)


def _resolve_declared(text: str) -> list[str]:
    """The names `text` declares that a resolver knows (their code now loaded)."""
    return [name for name in _declared(text) if _resolved(name)]


def _resolved(name: str) -> bool:
    return any(resolve(name) for resolve in _resolvers)


def _declared(text: str):
    for line in text.splitlines():
        if line.startswith("declare"):
            at = line.find("@")
            yield line[at + 1:line.find("(", at)].strip('"')


def _register_symbols(llvm) -> None:
    for name, address in _symbols.items():
        if name not in _registered:
            llvm.add_symbol(name, address)
            _registered.add(name)


@functools.lru_cache(maxsize=None)
def _global_address(name: str) -> int | None:
    try:
        return ctypes.cast(getattr(ctypes.CDLL(None), name), ctypes.c_void_p).value
    except AttributeError:
        return None


@functools.lru_cache(maxsize=None)
def _linker() -> str | None:
    return shutil.which("ld")


_broken_linkers: set[str] = set()     # linkers that failed once: not tried again


def _links_as_shared_library(text: str) -> bool:
    """A (working) linker exists and each add_symbol name the module declares is
    the address the dynamic linker finds for it."""
    if _linker() is None or _linker() in _broken_linkers:
        return False
    return all(name not in _symbols or _global_address(name) == _symbols[name]
               for name in _declared(text))


def default_cache_dir() -> Path:
    """$FGRAD_CACHE_DIR, else ~/.cache/fgrad."""
    return disk_cache.root()


def cache_key(llvm_ir_text: str, opt: int = 3) -> str:
    """sha256 of the IR text and everything else the object code depends on."""
    h = hashlib.sha256()
    for part in (ENGINE_VERSION, llvmlite.__version__, _host_identity(), str(opt)):
        h.update(part.encode())
        h.update(b"\0")
    h.update(llvm_ir_text.encode())
    return h.hexdigest()


@dataclass
class CompileStats:
    """What one `compile_module` call did; times in milliseconds."""
    cache_hit: bool = False
    key: str = ""
    parse_ms: float = 0.0          # parse + verify
    optimize_ms: float = 0.0
    codegen_ms: float = 0.0        # code generation + linking or MCJIT finalisation
    cache_load_ms: float = 0.0     # read + verify the cache file + load object
    cache_write_ms: float = 0.0
    total_ms: float = 0.0
    object_bytes: int = 0
    cache_path: str | None = None
    cache_error: str | None = None  # why a cache file was ignored / not written
    shared_library: bool = False   # loaded with dlopen (else by MCJIT)
    needs: list = None             # run-time functions it calls (add_resolver's names)
    link_error: str | None = None  # why linking a shared library failed (MCJIT was used)


class _Entry:
    """Callable for ``void entry(int64_t* argtable)``.

    Call with an int address of the argument table (fastest, ~0.3 µs) or a
    C-contiguous numpy int64 array.  `cfunc` is the raw ctypes function.
    Holds a reference to its CompiledModule so the code stays alive: whoever
    calls `cfunc` or `address` must hold the entry (or its module).
    """
    __slots__ = ("name", "address", "cfunc", "_owner", "__weakref__")

    def __init__(self, owner: "CompiledModule", name: str, address: int):
        self.name = name
        self.address = address
        self.cfunc = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)
        self._owner = owner

    def __call__(self, args) -> None:
        if type(args) is int:
            self.cfunc(args)
            return
        import numpy as np
        if not isinstance(args, np.ndarray):
            raise TypeError(f"entry {self.name!r} takes an int address or a numpy "
                            f"int64 array, not {type(args).__name__}")
        if args.dtype != np.int64 or not args.flags.c_contiguous:
            raise TypeError(f"entry {self.name!r}: argument table must be a "
                            f"C-contiguous int64 array (got {args.dtype})")
        self.cfunc(args.ctypes.data)

    def __repr__(self) -> str:
        return f"<entry {self.name} at {self.address:#x}>"


class CompiledModule:
    """Compiled code; the MCJIT engine or the loaded library lives as long as this
    object (and any entry obtained from it), and is freed (the library closed)
    when the last of them goes."""

    def __init__(self, code, stats: CompileStats, entry_names: Iterable[str]):
        self._code = code      # an MCJIT engine or a _Library
        self._lookup = (_library_lookup(code) if isinstance(code, ctypes.CDLL)
                        else code.get_function_address)
        self.stats = stats
        self._addresses: dict[str, int] = {}
        # entries hold the module: a weak map, so that module and entries are no cycle
        self._entries = weakref.WeakValueDictionary()
        for name in entry_names:
            addr = self._lookup(name)
            if not addr:
                raise CompileError(f"entry point {name!r} not found in the compiled module")
            self._addresses[name] = addr

    def address(self, name: str) -> int:
        """Address of function `name` (looked up and remembered on first use)."""
        addr = self._addresses.get(name)
        if addr is None:
            with _lock:
                addr = self._lookup(name)
            if not addr:
                raise KeyError(f"no function {name!r} in the compiled module")
            self._addresses[name] = addr
        return addr

    def entry(self, name: str) -> _Entry:
        """Callable for an entry ``void name(int64_t* argtable)``."""
        e = self._entries.get(name)
        if e is None:
            e = self._entries[name] = _Entry(self, name, self.address(name))
        return e

    def __repr__(self) -> str:
        hit = "cache hit" if self.stats.cache_hit else "compiled"
        return f"<CompiledModule {sorted(self._addresses)} ({hit}, {self.stats.total_ms:.1f} ms)>"


def _library_lookup(lib):
    def lookup(name):
        try:    # lib[name], not getattr: that keeps the function (and so lib) on lib
            return ctypes.cast(lib[name], ctypes.c_void_p).value or 0
        except AttributeError:
            return 0
    return lookup


# --------------------------------------------------------------------------
# Parsing and optimisation

def _parse(text: str):
    llvm = _binding()
    try:
        mod = llvm.parse_assembly(text)
    except RuntimeError as e:
        msg = str(e).strip()
        if msg.startswith("LLVM IR parsing error"):
            msg = msg[len("LLVM IR parsing error"):].strip()
        raise CompileError(f"LLVM IR parse error: {msg}") from None
    try:
        mod.verify()
    except RuntimeError as e:
        raise CompileError(f"LLVM IR verification failed: {str(e).strip()}") from None
    return mod


def _set_target(mod, tm) -> None:
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)


def _optimize(mod, opt: int, text: str) -> None:
    """The IR pipeline for `opt` on `mod` (parsed from `text`), as its attributes
    ask (LATE_INLINE, CODEGEN_ONLY)."""
    if f'"{CODEGEN_ONLY}"' in text:
        return
    llvm = _binding()
    tm = _kept_target_machine(opt)
    pto = llvm.create_pipeline_tuning_options(opt)
    pto.loop_vectorization = opt >= 2
    pto.slp_vectorization = opt >= 2
    pb = llvm.create_pass_builder(tm, pto)
    mpm = pb.getModulePassManager()
    mpm.run(mod, pb)
    if f'"{LATE_INLINE}"' in text:
        pm = llvm.create_new_module_pass_manager()
        pm.add_always_inliner_pass()
        pm.add_instruction_combine_pass()
        pm.add_simplify_cfg_pass()
        pm.run(mod, pb)


def _drop_unused(mod, entries) -> None:
    """After optimisation, every function but the entries is internal, and those
    nothing calls any more (e.g. the vector variants of a math function the
    vectoriser did not pick, kept weak_odr until it ran) are deleted rather than
    compiled."""
    llvm = _binding()
    for fn in mod.functions:
        if not fn.is_declaration and fn.name not in entries:
            fn.linkage = llvm.Linkage.internal
    pm = llvm.create_new_module_pass_manager()
    pm.add_global_dead_code_eliminate_pass()
    pm.run(mod, llvm.create_pass_builder(_kept_target_machine(3),
                                         llvm.create_pipeline_tuning_options(3)))


def optimized_ir(llvm_ir_text: str, opt: int = 3) -> str:
    """The IR after the optimisation pipeline `compile_module` uses."""
    initialize()
    with _lock:
        mod = _parse(llvm_ir_text)
        _set_target(mod, _kept_target_machine(opt))
        _optimize(mod, opt, llvm_ir_text)
        return str(mod)


def optimized_asm(llvm_ir_text: str, opt: int = 3) -> str:
    """Host assembly of the optimised module."""
    initialize()
    with _lock:
        mod = _parse(llvm_ir_text)
        tm = _kept_target_machine(opt)
        _set_target(mod, tm)
        _optimize(mod, opt, llvm_ir_text)
        return tm.emit_assembly(mod)


# --------------------------------------------------------------------------
# Loading

def _engine_from_object(payload: bytes, opt: int):
    """A fresh MCJIT engine whose (empty) module's code comes from `payload`
    through the object-cache getBuffer hook: no optimisation, no codegen."""
    llvm = _binding()
    _register_symbols(llvm)
    tm = host_target_machine(opt)
    mod = llvm.parse_assembly("")
    _set_target(mod, tm)
    engine = llvm.create_mcjit_compiler(mod, tm)
    pending = [payload]          # handed over once, not kept alive by the engine
    engine.set_object_cache(None, lambda _m: pending.pop() if pending else None)
    engine.finalize_object()
    return engine


class _Library(ctypes.CDLL):
    """A loaded shared library; dlclose'd once the last reference to it is gone
    (CompiledModules and their entries hold it, and whoever calls into it holds
    one of those; native worker threads run its code only within such a call)."""


_libraries = weakref.WeakValueDictionary()    # sha256 of the bytes -> live _Library


def _load_library(payload: bytes, export: bool = False) -> _Library:
    """dlopen a shared library's bytes through a file in a scratch directory of
    its own, both removed once loaded: nothing is left behind by a forked child
    (what a killed process leaves, `scratch.remove_stale` removes), and no two
    loads share a name (dlopen would return an earlier library of the same
    name). The same bytes loaded while an earlier load is alive give that library
    (one mapping of a program, not one per jit). `export`: its symbols resolve
    those of libraries loaded later (RTLD_GLOBAL)."""
    digest = hashlib.sha256(payload).digest() + bytes([export])
    lib = _libraries.get(digest)
    if lib is not None:
        return lib
    with scratch.directory("lib") as d:
        path = os.path.join(d, "k.so")
        with open(path, "wb") as f:
            f.write(payload)
        lib = _Library(path, mode=os.RTLD_GLOBAL if export else os.RTLD_LOCAL)
    # after the library's death (a weakref callback: it cannot come back, unlike in
    # __del__); not at exit, when daemon threads may still be running its code
    weakref.finalize(lib, _close_library, lib._handle).atexit = False
    _libraries[digest] = lib
    return lib


def _close_library(handle: int) -> None:
    import _ctypes
    _ctypes.dlclose(handle)


def _link_shared(mod, opt: int) -> bytes:
    """Position-independent code for `mod`, linked by `ld` into a shared library."""
    tm = _kept_target_machine(opt, pic=True)
    _set_target(mod, tm)
    obj = tm.emit_object(mod)
    with scratch.directory("link") as d:
        src, out = os.path.join(d, "k.o"), os.path.join(d, "k.so")
        with open(src, "wb") as f:
            f.write(obj)
        done = subprocess.run([_linker(), "-shared", "-z", "noexecstack", "-o", out, src],
                              capture_output=True, text=True)
        if done.returncode:
            raise OSError(f"ld failed: {done.stderr.strip()[:500]}")
        with open(out, "rb") as f:
            return f.read()


# --------------------------------------------------------------------------

def compile_module(llvm_ir_text: str, entry_names: Iterable[str] = (),
                   cache_dir: Path | str | None = None, *, cache: bool = True,
                   opt: int = 3, export: bool = False) -> CompiledModule:
    """Compile LLVM IR text for the host and return a `CompiledModule`.

    `entry_names` are looked up eagerly (a missing one raises CompileError).
    `cache_dir`: where compiled code is cached (default `default_cache_dir()`);
    `cache=False` bypasses the disk cache.  Statistics are in `.stats`.
    `export`: a shared library's symbols resolve those of code loaded later.
    """
    entry_names = list(entry_names)
    t_start = time.perf_counter()
    stats = CompileStats(needs=_resolve_declared(llvm_ir_text))
    shared = _links_as_shared_library(llvm_ir_text)
    name = None
    if cache:
        stats.key = cache_key(llvm_ir_text, opt)
        name = f"{stats.key}{'.so' if shared else '.o'}"
        stats.cache_path = str(disk_cache.root(cache_dir) / "cpu" / name)

    with _lock:
        if name is not None:
            t0 = time.perf_counter()
            payload, err = disk_cache.read(name, cache_dir)
            stats.cache_error = err
            if payload is not None:
                try:
                    code = (_load_library(payload, export) if shared
                            else _engine_from_object(payload, opt))
                    cm = CompiledModule(code, stats, entry_names)
                except (RuntimeError, CompileError, OSError) as e:
                    stats.cache_error = f"cached object unusable: {e}"
                else:
                    stats.cache_hit = True
                    stats.shared_library = shared
                    stats.object_bytes = len(payload)
                    stats.cache_load_ms = (time.perf_counter() - t0) * 1e3
                    stats.total_ms = (time.perf_counter() - t_start) * 1e3
                    return cm

        scratch.remove_stale()      # left by a process killed while compiling
        llvm = _binding()
        initialize()
        _register_symbols(llvm)
        t0 = time.perf_counter()
        mod = _parse(llvm_ir_text)
        _set_target(mod, _kept_target_machine(opt))
        t1 = time.perf_counter()
        _optimize(mod, opt, llvm_ir_text)
        if entry_names:
            _drop_unused(mod, set(entry_names))
        t2 = time.perf_counter()
        payload = cm = None
        if shared:
            try:
                payload = _link_shared(mod, opt)
                cm = CompiledModule(_load_library(payload, export), stats, entry_names)
                stats.shared_library = True
            except OSError as e:    # no usable linker after all: MCJIT below
                stats.link_error = str(e)
                _broken_linkers.add(_linker())
                payload = cm = None
                if name is not None:
                    name = f"{stats.key}.o"
                    stats.cache_path = str(Path(stats.cache_path).with_name(name))
        if cm is None:
            tm = host_target_machine(opt)          # owned by the engine below
            _set_target(mod, tm)
            engine = llvm.create_mcjit_compiler(mod, tm)
            objects: list[bytes] = []
            engine.set_object_cache(lambda _m, buf: objects.append(buf), None)
            engine.finalize_object()
            cm = CompiledModule(engine, stats, entry_names)
            payload = objects[0] if len(objects) == 1 else None
        t3 = time.perf_counter()
        stats.parse_ms = (t1 - t0) * 1e3
        stats.optimize_ms = (t2 - t1) * 1e3
        stats.codegen_ms = (t3 - t2) * 1e3
        if payload:
            stats.object_bytes = len(payload)
        if name is not None and payload:
            err = disk_cache.write(name, payload, cache_dir)
            if err:
                stats.cache_error = err
            stats.cache_write_ms = (time.perf_counter() - t3) * 1e3
        stats.total_ms = (time.perf_counter() - t_start) * 1e3
        return cm


# --------------------------------------------------------------------------
# Aliases: compiled code found by a key known before the IR exists

_HEX_KEY = re.compile(r"[0-9a-f]{64}\Z")


def load_alias(alias_key: str, entry_names: Iterable[str] = (),
               cache_dir: Path | str | None = None, export: bool = False):
    """(CompiledModule, metadata) for the code `save_alias` stored under
    `alias_key`, or None when there is none (or it is unusable): then the
    caller emits the IR and calls `compile_module`. The metadata is JSON read
    from disk: the caller checks it before it steers native code. The run-time
    functions the code calls are loaded first (only names a resolver knows)."""
    t_start = time.perf_counter()
    blob, _ = disk_cache.read(f"{alias_key}.alias", cache_dir)
    if blob is None:
        return None
    try:
        record = json.loads(blob)
        key, shared, meta = record["key"], record["shared"], record["meta"]
        needs = record.get("needs", [])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if type(key) is not str or not _HEX_KEY.match(key) or type(shared) is not bool \
            or type(meta) is not dict or type(needs) is not list \
            or not all(type(n) is str and _resolved(n) for n in needs):
        return None
    name = f"{key}{'.so' if shared else '.o'}"
    payload, _ = disk_cache.read(name, cache_dir)
    if payload is None:
        return None
    stats = CompileStats(cache_hit=True, key=key, object_bytes=len(payload),
                         cache_path=str(disk_cache.root(cache_dir) / "cpu" / name),
                         shared_library=shared, needs=needs)
    with _lock:
        try:
            code = _load_library(payload, export) if shared else _engine_from_object(payload, 3)
            cm = CompiledModule(code, stats, list(entry_names))
        except (RuntimeError, CompileError, OSError):
            return None
    stats.cache_load_ms = stats.total_ms = (time.perf_counter() - t_start) * 1e3
    return cm, meta


def compile_runtime(tag: str, entry_names: Iterable[str], emit, *,
                    export: bool = False) -> CompiledModule:
    """fgrad's own run-time code (`emit()` -> IR text), which depends only on
    fgrad's sources and `tag`: found through an alias in the disk cache by a new
    process without emitting any IR, else emitted and compiled. `export`: see
    `compile_module`."""
    entry_names = list(entry_names)
    alias = _runtime_alias(tag)
    found = load_alias(alias, entry_names, export=export) if alias else None
    if found is not None:
        return found[0]
    with _lock:                 # (emitting may import llvmlite.ir: see compiler_lock)
        module = compile_module(emit(), entry_names, export=export)
    if alias:
        save_alias(alias, module, {})
    return module


def runtime_cached(tag: str) -> bool:
    """Whether the disk cache has an alias for `compile_runtime(tag, ...)`'s code
    (which may still prove unusable when loaded)."""
    alias = _runtime_alias(tag)
    return bool(alias) and disk_cache.exists(f"{alias}.alias")


def _runtime_alias(tag):
    from ..jit.fingerprint import source_digest
    sources = source_digest()
    return sources and cache_key(f"fgrad runtime {tag} {sources}")


def save_alias(alias_key: str, module: CompiledModule, meta: dict) -> None:
    """Remember that `alias_key` names `module`'s cached code (and JSON-able
    `meta`); nothing is written when the module is not in the disk cache."""
    stats = module.stats
    if not stats.key or not stats.cache_path:
        return
    path = Path(stats.cache_path)
    cache_dir = path.parent.parent
    if not disk_cache.exists(path.name, cache_dir):
        return
    record = {"key": stats.key, "shared": path.suffix == ".so", "meta": meta,
              "needs": stats.needs or []}
    disk_cache.write(f"{alias_key}.alias", json.dumps(record).encode(), cache_dir)
