"""The LLVM side of the CPU backend, independent of fgrad's own IR.

`compile_module(text, entries)` parses LLVM IR text, optimises it for the
host CPU (O3 with loop and SLP vectorisation), JIT-compiles it with MCJIT and
returns a `CompiledModule` exposing function addresses and ctypes callables
for entry points of the form ``void entry(int64_t* argtable)``.

Compiled objects are cached on disk, keyed on the IR text, llvmlite/LLVM
versions, the host CPU name and features and `ENGINE_VERSION`; a hit loads
the object into a fresh engine through MCJIT's object-cache hook, so neither
optimisation nor code generation runs.

Facts about llvmlite 0.50 this relies on (see the project's cpu-codegen
notes): the legacy pass manager is gone and `llvm.initialize()` raises;
MCJIT takes ownership of the TargetMachine it is given, so every engine gets
its own fresh one.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import llvmlite
import llvmlite.binding as llvm

__all__ = [
    "ENGINE_VERSION", "CompileError", "CompileStats", "CompiledModule",
    "initialize", "host_cpu", "host_target_machine", "host_has_feature", "host_triple",
    "compile_module", "optimized_ir", "optimized_asm", "add_symbol",
    "default_cache_dir", "cache_key",
]

#: Bump whenever the compilation pipeline changes in a way that changes code.
ENGINE_VERSION = "1"

_CACHE_MAGIC = b"FGRADOBJ\x01"
_HEADER_LEN = len(_CACHE_MAGIC) + 32 + 8     # magic, sha256(payload), length

# LLVM's global context and the pass pipelines are not thread-safe.
_lock = threading.RLock()
_initialized = False


class CompileError(RuntimeError):
    """LLVM rejected the IR (parse or verification error) or an entry is missing."""


def initialize() -> None:
    """Initialise LLVM's native target and asm printer (idempotent)."""
    global _initialized
    if _initialized:
        return
    with _lock:
        if not _initialized:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _initialized = True


@functools.lru_cache(maxsize=None)
def host_cpu() -> tuple[str, str]:
    """(CPU name, flattened feature string) of the host."""
    initialize()
    name = llvm.get_host_cpu_name()
    try:
        features = llvm.get_host_cpu_features().flatten()
    except RuntimeError:        # not available on some platforms
        features = ""
    return name, features


@functools.lru_cache(maxsize=None)
def host_triple() -> str:
    """The LLVM target triple of this process (e.g. x86_64-unknown-linux-gnu)."""
    initialize()
    return llvm.get_process_triple()


def host_has_feature(feature: str) -> bool:
    """Whether the host CPU has `feature` (LLVM spelling, e.g. 'avx2', 'fma')."""
    return ("+" + feature) in host_cpu()[1].split(",")


def host_target_machine(opt: int = 3) -> "llvm.TargetMachine":
    """A fresh TargetMachine for the host CPU (never share one between engines)."""
    initialize()
    name, features = host_cpu()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(cpu=name, features=features, opt=opt,
                                        jit=True)


def add_symbol(name: str, address: int) -> None:
    """Make `name` resolve to `address` in JIT-compiled code (e.g. a BLAS routine)."""
    initialize()
    llvm.add_symbol(name, int(address))


def default_cache_dir() -> Path:
    """$FGRAD_CACHE_DIR, else ~/.cache/fgrad."""
    env = os.environ.get("FGRAD_CACHE_DIR")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "fgrad"


def cache_key(llvm_ir_text: str, opt: int = 3) -> str:
    """sha256 of the IR text and everything else the object code depends on."""
    name, features = host_cpu()
    h = hashlib.sha256()
    for part in (ENGINE_VERSION, llvmlite.__version__,
                 ".".join(map(str, llvm.llvm_version_info)),
                 llvm.get_process_triple(), name, features, str(opt)):
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
    codegen_ms: float = 0.0        # MCJIT code generation + finalisation
    cache_load_ms: float = 0.0     # read + verify the cache file + load object
    cache_write_ms: float = 0.0
    total_ms: float = 0.0
    object_bytes: int = 0
    cache_path: str | None = None
    cache_error: str | None = None  # why a cache file was ignored / not written


class _Entry:
    """Callable for ``void entry(int64_t* argtable)``.

    Call with an int address of the argument table (fastest, ~0.3 µs) or a
    C-contiguous numpy int64 array.  `cfunc` is the raw ctypes function.
    Holds a reference to its CompiledModule so the code stays alive.
    """
    __slots__ = ("name", "address", "cfunc", "_owner")

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
    """JIT-compiled code; the MCJIT engine lives as long as this object (and
    any entry obtained from it)."""

    def __init__(self, engine, stats: CompileStats, entry_names: Iterable[str]):
        self._engine = engine
        self.stats = stats
        self._addresses: dict[str, int] = {}
        self._entries: dict[str, _Entry] = {}
        for name in entry_names:
            addr = engine.get_function_address(name)
            if not addr:
                raise CompileError(f"entry point {name!r} not found in the compiled module")
            self._addresses[name] = addr

    def address(self, name: str) -> int:
        """Address of function `name` (looked up and remembered on first use)."""
        addr = self._addresses.get(name)
        if addr is None:
            with _lock:
                addr = self._engine.get_function_address(name)
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


# --------------------------------------------------------------------------
# Parsing and optimisation

def _parse(text: str):
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


def _optimize(mod, opt: int) -> None:
    tm = host_target_machine(opt)
    pto = llvm.create_pipeline_tuning_options(opt)
    pto.loop_vectorization = opt >= 2
    pto.slp_vectorization = opt >= 2
    pb = llvm.create_pass_builder(tm, pto)
    mpm = pb.getModulePassManager()
    mpm.run(mod, pb)


def optimized_ir(llvm_ir_text: str, opt: int = 3) -> str:
    """The IR after the optimisation pipeline `compile_module` uses."""
    initialize()
    with _lock:
        mod = _parse(llvm_ir_text)
        _set_target(mod, host_target_machine(opt))
        _optimize(mod, opt)
        return str(mod)


def optimized_asm(llvm_ir_text: str, opt: int = 3) -> str:
    """Host assembly of the optimised module."""
    initialize()
    with _lock:
        mod = _parse(llvm_ir_text)
        tm = host_target_machine(opt)
        _set_target(mod, tm)
        _optimize(mod, opt)
        return tm.emit_assembly(mod)


# --------------------------------------------------------------------------
# Disk cache

def _read_cache(path: Path) -> tuple[bytes | None, str | None]:
    """(object bytes, None) or (None, reason it is unusable)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError as e:
        return None, f"unreadable cache file: {e}"
    if len(data) < _HEADER_LEN or not data.startswith(_CACHE_MAGIC):
        return None, "corrupt cache file (bad header)"
    off = len(_CACHE_MAGIC)
    digest = data[off:off + 32]
    length = int.from_bytes(data[off + 32:off + 40], "little")
    payload = data[_HEADER_LEN:]
    if len(payload) != length or hashlib.sha256(payload).digest() != digest:
        return None, "corrupt cache file (bad checksum)"
    return payload, None


def _write_cache(path: Path, payload: bytes) -> str | None:
    """Write atomically (temp file + os.replace); returns an error or None."""
    blob = (_CACHE_MAGIC + hashlib.sha256(payload).digest()
            + len(payload).to_bytes(8, "little") + payload)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".o")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError as e:
        return f"could not write cache file: {e}"
    return None


def _engine_from_object(payload: bytes, opt: int):
    """A fresh MCJIT engine whose (empty) module's code comes from `payload`
    through the object-cache getBuffer hook: no optimisation, no codegen."""
    tm = host_target_machine(opt)
    mod = llvm.parse_assembly("")
    _set_target(mod, tm)
    engine = llvm.create_mcjit_compiler(mod, tm)
    pending = [payload]          # handed over once, not kept alive by the engine
    engine.set_object_cache(None, lambda _m: pending.pop() if pending else None)
    engine.finalize_object()
    return engine


# --------------------------------------------------------------------------

def compile_module(llvm_ir_text: str, entry_names: Iterable[str] = (),
                   cache_dir: Path | str | None = None, *, cache: bool = True,
                   opt: int = 3) -> CompiledModule:
    """Compile LLVM IR text for the host and return a `CompiledModule`.

    `entry_names` are looked up eagerly (a missing one raises CompileError).
    `cache_dir`: where objects are cached (default `default_cache_dir()`);
    `cache=False` bypasses the disk cache.  Statistics are in `.stats`.
    """
    initialize()
    entry_names = list(entry_names)
    t_start = time.perf_counter()
    stats = CompileStats()
    path = None
    if cache:
        stats.key = cache_key(llvm_ir_text, opt)
        cdir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        path = cdir / "cpu" / f"{stats.key}.o"
        stats.cache_path = str(path)

    with _lock:
        if path is not None:
            t0 = time.perf_counter()
            payload, err = _read_cache(path)
            stats.cache_error = err
            if payload is not None:
                try:
                    engine = _engine_from_object(payload, opt)
                    cm = CompiledModule(engine, stats, entry_names)
                except (RuntimeError, CompileError) as e:
                    stats.cache_error = f"cached object unusable: {e}"
                else:
                    stats.cache_hit = True
                    stats.object_bytes = len(payload)
                    stats.cache_load_ms = (time.perf_counter() - t0) * 1e3
                    stats.total_ms = (time.perf_counter() - t_start) * 1e3
                    return cm

        t0 = time.perf_counter()
        mod = _parse(llvm_ir_text)
        tm = host_target_machine(opt)          # owned by the engine below
        _set_target(mod, tm)
        t1 = time.perf_counter()
        _optimize(mod, opt)
        t2 = time.perf_counter()
        engine = llvm.create_mcjit_compiler(mod, tm)
        objects: list[bytes] = []
        engine.set_object_cache(lambda _m, buf: objects.append(buf), None)
        engine.finalize_object()
        cm = CompiledModule(engine, stats, entry_names)
        t3 = time.perf_counter()
        stats.parse_ms = (t1 - t0) * 1e3
        stats.optimize_ms = (t2 - t1) * 1e3
        stats.codegen_ms = (t3 - t2) * 1e3
        if objects:
            stats.object_bytes = len(objects[0])
        if path is not None and len(objects) == 1:
            err = _write_cache(path, objects[0])
            if err:
                stats.cache_error = err
            stats.cache_write_ms = (time.perf_counter() - t3) * 1e3
        objects.clear()
        stats.total_ms = (time.perf_counter() - t_start) * 1e3
        return cm
