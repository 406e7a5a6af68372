"""A short tour of fgrad's transforms (`make tour`): grad, jvp, vjp,
Hessian-vector products and make_jaxpr.

It follows the worked example of the founding documents,
    f(x1, x2) = ln(x1) + x1*x2 - sin(x2)   at (x1, x2) = (2, 5),
whose oracle values are f = 11.652, df/dx1 = 5.5, df/dx2 = 1.716.
"""
import sys
from pathlib import Path

import numpy as np

try:
    import fgrad
except ImportError:  # a source checkout run without `make install`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import fgrad
import fgrad.numpy as fnp
from fgrad import lax


def section(title):
    print(f"\n== {title} " + "=" * max(0, 66 - len(title)))


def f(x1, x2):
    return fnp.log(x1) + x1 * x2 - fnp.sin(x2)


# 0-d float64 arrays: fgrad keeps the dtype it is given (no global x64 switch).
x1, x2 = np.array(2.0), np.array(5.0)

section("value_and_grad: f and both partial derivatives")
value, (d1, d2) = fgrad.value_and_grad(f, argnums=(0, 1))(x1, x2)
print(f"f(2, 5)  = {value:.3f}    (expected 11.652)")
print(f"df/dx1   = {d1:.3f}     (expected 5.5)")
print(f"df/dx2   = {d2:.3f}     (expected 1.716)")
print(f"dtypes   = {value.dtype}, {d1.dtype}, {d2.dtype}")

section("jvp: forward mode, one directional derivative per pass")
direction = (np.array(1.0), np.array(1.0))
out, slope = fgrad.jvp(f, (x1, x2), direction)
print(f"f = {out:.3f};  grad f . (1, 1) = {slope:.3f}  (= 5.5 + 1.716)")

section("vjp: reverse mode, one pass gives every input's sensitivity")
out, pullback = fgrad.vjp(f, x1, x2)
c1, c2 = pullback(np.array(1.0))
print(f"pullback(1.0) = ({c1:.3f}, {c2:.3f})")

section("grad: a new function that returns the gradient")
grad_f = fgrad.grad(f, argnums=(0, 1))       # argnums=0 (the default) gives df/dx1 alone
print(f"grad(f)(2, 5)          = {tuple(round(float(g), 3) for g in grad_f(x1, x2))}")
print(f"grad(f, argnums=1)(..) = {fgrad.grad(f, argnums=1)(x1, x2):.3f}")

section("Hessian: jvp of grad, one column per basis tangent")
basis = [(np.array(1.0), np.array(0.0)), (np.array(0.0), np.array(1.0))]
columns = [fgrad.jvp(grad_f, (x1, x2), e)[1] for e in basis]
H = np.array([[float(c[i]) for c in columns] for i in range(2)])
print("H =\n", np.round(H, 4))
print("analytic [[-1/x1^2, 1], [1, sin(x2)]] =\n",
      np.round([[-1 / 4, 1], [1, np.sin(5.0)]], 4))

section("Hessian-vector products: H v without forming H")
v = (np.array(0.5), np.array(-2.0))


def hvp_forward_over_reverse(x, v):
    return fgrad.jvp(lambda *x: grad_f(*x), x, v)[1]      # d/dt grad f(x + t v)


def hvp_reverse_over_reverse(x, v):
    def slope(*x):                                       # <grad f(x), v>, a scalar
        return sum(g * vi for g, vi in zip(grad_f(*x), v))
    return fgrad.grad(slope, argnums=(0, 1))(*x)


print("v                         =", tuple(float(t) for t in v))
print("forward over reverse H v  =", tuple(round(float(t), 4) for t in
                                         hvp_forward_over_reverse((x1, x2), v)))
print("reverse over reverse H v  =", tuple(round(float(t), 4) for t in
                                         hvp_reverse_over_reverse((x1, x2), v)))
H_full = fgrad.hessian(f, argnums=(0, 1))(x1, x2)      # nested: H_full[i][j] = d2f/dxi dxj
print("fgrad.hessian(f) @ v      =", tuple(round(float(sum(H_full[i][j] * v[j]
                                                             for j in range(2))), 4)
                                         for i in range(2)))
print("analytic H v              =", tuple(round(float(t), 4) for t in
                                         np.array([[-1 / 4, 1], [1, np.sin(5.0)]]) @ [0.5, -2.0]))

section("make_jaxpr: the program fgrad traces for f ...")
print(fgrad.make_jaxpr(f)(x1, x2))
print("... and for grad(f): the forward pass, then the transposed linear part")
print(fgrad.make_jaxpr(grad_f)(x1, x2))
print("... and for the forward-over-reverse Hessian-vector product")
print(fgrad.make_jaxpr(hvp_forward_over_reverse)((x1, x2), v))


section("a shared node: y = e^x (e^x + 1)")


def y(x):
    ex = fnp.exp(x)          # used twice: its adjoints add up in reverse mode
    return ex * (ex + 1)


for x in (0.0, 1.0, 2.0):
    x = np.array(x)
    dy = fgrad.grad(y)(x)
    exact = 2 * np.exp(2 * x) + np.exp(x)
    print(f"x = {float(x):.1f}: y = {y(x):8.4f}   dy/dx = {dy:9.4f}   "
          f"analytic 2e^2x + e^x = {exact:9.4f}")

section("higher order: grad of grad of grad of sin")
d3 = fgrad.grad(fgrad.grad(fgrad.grad(fnp.sin)))
for x in (0.0, 1.0):
    print(f"sin'''({x}) = {d3(np.array(x)):+.6f}   (-cos x = {-np.cos(x):+.6f})")

section("custom_jvp: log(1 + e^x) with a stable value and derivative")


def log1pexp_naive(x):
    return fnp.log(1 + fnp.exp(x))


@fgrad.custom_jvp
def log1pexp(x):
    # max(x, 0) + log1p(e^-|x|): never overflows
    return lax.max(x, 0.0) + lax.log1p(fnp.exp(-lax.abs(x)))


@log1pexp.defjvp
def log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return log1pexp(x), t / (1 + fnp.exp(-x))   # d/dx = sigmoid(x)


for x in (np.float32(3.0), np.float32(100.0)):
    with np.errstate(all="ignore"):
        naive = (log1pexp_naive(x), fgrad.grad(log1pexp_naive)(x))
    stable = (log1pexp(x), fgrad.grad(log1pexp)(x))
    print(f"x = {x:5.1f} (float32): naive value {naive[0]:8.4f}, grad {naive[1]:.4f}"
          f"  |  custom_jvp value {stable[0]:8.4f}, grad {stable[1]:.4f}")
print("second derivative at 0 (sigmoid'(0) = 0.25):",
      f"{fgrad.grad(fgrad.grad(log1pexp))(np.array(0.0)):.4f}")
