"""Structured control flow: higher-order primitives holding closed jaxprs, with
rules for every transform (see each module)."""
from .cond import cond, cond_p, switch  # noqa: F401
from .cond_lanes import cond_lanes_p  # noqa: F401
from .scan import map, scan, scan_p  # noqa: F401
from .while_loop import fori_loop, while_loop, while_p  # noqa: F401
