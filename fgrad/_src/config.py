"""Global switches: `fgrad.config.update(name, value)`."""
import os


def _flag(name):
    return os.environ.get(name, "0").strip().lower() not in ("", "0", "false", "no")


class Config:
    """Settings read by the library; change them with `update`."""

    def __init__(self):
        # Type-check every jaxpr that tracing or a transform builds (tests turn it on).
        self.check_jaxprs = _flag("FGRAD_CHECK_JAXPRS")
        # Run jitted functions eagerly, op by op (for debugging).
        self.disable_jit = _flag("FGRAD_DISABLE_JIT")
        # Log every jit compile (what was traced, why, and how long it took).
        self.log_compiles = _flag("FGRAD_LOG_COMPILES")

    def update(self, name, value):
        if not hasattr(self, name):
            raise AttributeError(f"unknown fgrad config option {name!r}; "
                                 f"known: {sorted(vars(self))}")
        setattr(self, name, value)


config = Config()
