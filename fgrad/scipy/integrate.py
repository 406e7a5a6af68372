"""fgrad.scipy.integrate: odeint (Dormand–Prince with adjoint gradients) and trapezoid."""
from fgrad._src.scipy.ode import odeint  # noqa: F401
from fgrad._src.scipy.quadrature import trapezoid  # noqa: F401

__all__ = ["odeint", "trapezoid"]
