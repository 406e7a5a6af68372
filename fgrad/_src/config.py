"""Global switches: `fgrad.config.update(name, value)`."""
import os


class Config:
    """Settings read by the library; change them with `update`."""

    def __init__(self):
        # Type-check every jaxpr that tracing or a transform builds (tests turn it on).
        self.check_jaxprs = os.environ.get("FGRAD_CHECK_JAXPRS", "0") not in ("", "0")

    def update(self, name, value):
        if not hasattr(self, name):
            raise AttributeError(f"unknown fgrad config option {name!r}; "
                                 f"known: {sorted(vars(self))}")
        setattr(self, name, value)


config = Config()
