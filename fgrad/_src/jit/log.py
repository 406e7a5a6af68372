"""Compile logging: `fgrad.config.update("log_compiles", True)` or FGRAD_LOG_COMPILES=1."""
import logging

from ..config import config

logger = logging.getLogger("fgrad.jit")


def log_compile(name, closed, executable, seconds):
    if not config.log_compiles:
        return
    steps = len(executable.kernels)
    native = sum(1 for k in executable.kernels if not k.label.startswith("numpy:"))
    stats = executable.compile_stats
    cached = " (native code from the disk cache)" if stats is not None and stats.cache_hit else ""
    _emit(f"compiled {name}: {len(closed.jaxpr.eqns)} equations -> {steps} steps "
          f"({native} native) in {seconds * 1e3:.1f} ms{cached}")


def log_trace(name, reason):
    if config.log_compiles:
        _emit(f"tracing {name}: {reason}")


def _emit(message):
    # WARNING, so the message shows without any logging set-up (as JAX does).
    logger.warning(message)
