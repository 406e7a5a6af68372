"""Values known now: an Array's, or the primal inside forward-mode tracers (grad
and jvp without jit run on concrete values), so value-dependent shapes work
under grad as they do eagerly, and need size=/length= only under jit and vmap."""
from ..core import Array


def concrete_value(x):
    """x's NumPy value when it is known now, else None."""
    from ..ad import JVPTracer
    while isinstance(x, JVPTracer):
        x = x.primal
    return x._value if type(x) is Array else None
