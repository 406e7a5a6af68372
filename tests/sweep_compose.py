"""Sweep: compositions of transforms must agree with each other.

Run as a script (`python tests/sweep_compose.py [substring]`). For each case (a
function of one float64 vector, often with control flow, custom rules or
checkpointing) it compares:
  * jacfwd against jacrev, and both under jit;
  * vmap(grad(sum f)) per example against a loop of grads, eager and under jit;
  * grad of the function under jit against eager grad;
  * the Hessian (jacfwd(jacrev)) against jacrev(jacrev) and jacfwd(jacfwd);
  * central differences of the gradient (float64) where the function is smooth.
"""
import warnings

import numpy as np

import fgrad
import fgrad.numpy as fnp
from fgrad import lax
import fgrad.scipy.special  # noqa: F401
import fgrad.scipy.linalg  # noqa: F401
from sweep_util import run_cases

warnings.simplefilter("ignore")
rng = np.random.default_rng(1)
CASES = []


def case(name, f, x, smooth=True):
    CASES.append((name, f, np.asarray(x, np.float64), smooth))


@fgrad.custom_jvp
def softclip(x):
    return fnp.tanh(x) * 2.0


@softclip.defjvp
def _softclip_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return softclip(x), 2.0 * (1 - fnp.tanh(x) ** 2) * t


@fgrad.custom_vjp
def scaled_sin(x, k):
    return fnp.sin(x) * k


def _ss_fwd(x, k):
    return scaled_sin(x, k), (x, k)


def _ss_bwd(res, g):
    x, k = res
    return g * fnp.cos(x) * k, (g * fnp.sin(x)).sum() if np.ndim(k) == 0 and False else g * fnp.sin(x)


scaled_sin.defvjp(_ss_fwd, _ss_bwd)


@fgrad.custom_jvp
def clipped_norm(x):
    return fnp.sqrt(fnp.sum(x * x))


@clipped_norm.defjvp
def _cn_jvp(p, t):
    (x,), (tx,) = p, t
    n = clipped_norm(x)
    return n, fnp.sum(x * tx) / fnp.maximum(n, 1e-12)


x5 = rng.standard_normal(5)
case("cond", lambda x: lax.cond(x[0] > 0, lambda v: fnp.sin(v) * v, lambda v: v ** 3, x), x5)
case("cond neg", lambda x: lax.cond(x[0] > 0, lambda v: fnp.sin(v) * v, lambda v: v ** 3, x), -np.abs(x5))
case("cond closure", lambda x: lax.cond(x.sum() > 0, lambda: x * x[1], lambda: fnp.exp(x)), x5)
case("switch", lambda x: lax.switch((x[0] > 0).astype(int) + (x[1] > 0).astype(int),
                                    [lambda v: v, lambda v: fnp.sin(v), lambda v: v * v], x), x5)
case("while", lambda x: lax.while_loop(lambda c: c[1] < 4, lambda c: (fnp.sin(c[0]) * 1.1, c[1] + 1),
                                       (x, 0))[0], x5)
case("fori static", lambda x: lax.fori_loop(0, 4, lambda i, c: c * fnp.cos(c) + i * 0.1, x), x5)
case("fori dyn value", lambda x: lax.fori_loop(0, 3, lambda i, c: c.at[i].multiply(c[i + 1]), x), x5)
case("scan", lambda x: lax.scan(lambda c, a: (c * fnp.tanh(a) + a, c * a), x[0], x)[1], x5)
case("scan carry tuple", lambda x: lax.scan(lambda c, a: ((c[0] + a * c[1], c[1] * 0.9 + a), c[0]),
                                            (x[0], x[1]), x)[0][0] * x, x5)
case("scan reverse", lambda x: lax.scan(lambda c, a: (c * a + fnp.sin(c), c), x[0], x,
                                        reverse=True)[1], x5)
case("map", lambda x: lax.map(lambda a: fnp.sin(a) * a, x), x5)
case("custom_jvp", lambda x: softclip(x) * x, x5)
case("custom_jvp in scan", lambda x: lax.scan(lambda c, a: (softclip(c * a), c), 0.5, x)[1], x5)
case("custom_vjp", lambda x: scaled_sin(x, x[::-1]), x5)
case("custom_vjp in cond", lambda x: lax.cond(x[0] > -10, lambda v: scaled_sin(v, 2.0 * v),
                                              lambda v: v, x), x5)
case("custom_jvp norm", lambda x: clipped_norm(x) * x, x5)
case("checkpoint", lambda x: fgrad.checkpoint(lambda v: fnp.sin(fnp.sin(v)) * v)(x) * x, x5)
case("checkpoint scan", lambda x: lax.scan(fgrad.checkpoint(lambda c, a: (fnp.sin(c) * a, c)),
                                           x[0], x)[1], x5)
case("stop_gradient", lambda x: x * fgrad.lax.stop_gradient(x) ** 2, x5)
case("jit inside", lambda x: fgrad.jit(lambda v: fnp.sin(v) * v.sum())(x) * x, x5)
case("nested jit static", lambda x: fgrad.jit(lambda v, n: v ** n, static_argnums=1)(x, 3), x5)
case("sort", lambda x: fnp.sort(x) * fnp.arange(5.0), x5)
case("argsort take", lambda x: x[fnp.argsort(x)] * fnp.arange(5.0), x5)
case("cumsum rev", lambda x: lax.cumsum(x * x, reverse=True), x5)
case("cumprod", lambda x: fnp.cumprod(x), x5)
case("cummax", lambda x: lax.cummax(x, axis=0) * x, x5, smooth=False)
case("logcumsumexp", lambda x: lax.cumsum(fnp.exp(x)) if not hasattr(lax, "cumlogsumexp")
     else lax.cumlogsumexp(x), x5)
case("dynamic_slice", lambda x: lax.dynamic_slice(x, (fnp.argmax(x),), (2,)) * 3, x5)
case("dynamic_update_slice", lambda x: lax.dynamic_update_slice(x, x[:2] ** 2, (1,)), x5)
case("gather dup", lambda x: x[fnp.array([0, 0, 3, 1])] ** 2, x5)
case("scatter add dup", lambda x: fnp.zeros(3, dtype="float64").at[fnp.array([0, 0, 2, 1, 2])].add(x * x), x5)
case("scatter set", lambda x: x.at[fnp.array([1, 3])].set(x[:2] * x[2:4]), x5)
case("scatter mul", lambda x: x.at[fnp.array([1, 3])].multiply(x[:2]), x5)
case("scatter max", lambda x: x.at[fnp.array([1, 3])].max(x[:2] * 2), x5, smooth=False)
case("where", lambda x: fnp.where(x > 0, fnp.sin(x), x ** 2), x5)
case("matmul", lambda x: fnp.outer(x, x) @ fnp.sin(x), x5)
case("linalg solve", lambda x: fnp.linalg.solve(fnp.outer(x, x) + 3 * fnp.eye(5), x), x5)
case("linalg eigh", lambda x: fnp.linalg.eigh(fnp.outer(x, x) + fnp.diag(x))[0], x5)
case("linalg det", lambda x: fnp.linalg.det(fnp.outer(x, x[::-1]) + fnp.diag(x)) * x, x5)
case("linalg inv", lambda x: fnp.linalg.inv(fnp.outer(x, x) + 3 * fnp.eye(5)) @ x, x5)
case("linalg cholesky", lambda x: fnp.linalg.cholesky(fnp.outer(x, x) + 3 * fnp.eye(5))[:, 0], x5)
case("linalg qr", lambda x: fnp.linalg.qr(fnp.outer(x, x[::-1]) + fnp.diag(x) + 4 * fnp.eye(5))[1][0], x5)
case("linalg svd", lambda x: fnp.linalg.svd(fnp.outer(x, x[::-1]) + fnp.diag(x * 3), compute_uv=False), x5)
case("fft", lambda x: fnp.abs(fnp.fft.fft(x)) ** 2, x5)
case("rfft irfft", lambda x: fnp.fft.irfft(fnp.fft.rfft(x) * fnp.arange(3.0), n=5), x5)
case("conv", lambda x: lax.conv_general_dilated(x.reshape(1, 1, 5), fnp.sin(x[:3]).reshape(1, 1, 3),
                                                (1,), "SAME").ravel(), x5)
case("reduce_window", lambda x: lax.reduce_window_max(x, (2,), (1,), "VALID") if hasattr(lax, "reduce_window_max")
     else x, x5, smooth=False)
case("softmax", lambda x: fgrad.nn.softmax(x) * x, x5)
case("logsumexp", lambda x: fgrad.scipy.special.logsumexp(x) * x, x5)
case("norm", lambda x: fnp.linalg.norm(x) * x, x5)
case("var", lambda x: fnp.var(x) * x, x5)
case("median", lambda x: fnp.median(x) * x, x5)
case("quantile", lambda x: fnp.quantile(x, 0.3) * x, x5)
case("pow xy", lambda x: fnp.abs(x) ** x[::-1], x5)
case("integer_pow", lambda x: lax.integer_pow(x, 5) + lax.integer_pow(x, -2), x5)
case("erf_inv", lambda x: lax.erf_inv(fnp.tanh(x) * 0.9), x5)
case("igamma", lambda x: lax.igamma(fnp.exp(x[0]), fnp.exp(x)), x5)
case("random in fn", lambda x: x * fgrad.random.normal(fgrad.random.PRNGKey(0), (5,), dtype="float64"), x5)
case("expm", lambda x: fgrad.scipy.linalg.expm(fnp.outer(x, x[::-1]) * 0.1)[0], x5)
case("while grad-only fwd", lambda x: lax.fori_loop(0, x.shape[0], lambda i, c: c + x[i] ** 2, 0.0) * x, x5)


def tclose(a, b, rtol=1e-9, atol=1e-10):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return f"shape {a.shape} vs {b.shape}"
    if not np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
        i = np.unravel_index(np.nanargmax(np.abs(a - b)), a.shape)
        return f"max diff at {i}: {a[i]} vs {b[i]}"
    return None


def run(name, f, x, smooth):
    out = []
    X = fnp.asarray(x)

    def check(label, fn, ref, rtol=1e-9):
        try:
            got = fn()
        except Exception as e:
            out.append(f"{label} RAISES {type(e).__name__}: {str(e)[:250]}")
            return None
        m = tclose(got, ref, rtol)
        if m:
            out.append(f"{label}: {m}")
        return got

    try:
        jr = fgrad.jacrev(f)(X)
    except Exception as e:
        return [f"jacrev RAISES {type(e).__name__}: {str(e)[:300]}"]
    check("jacfwd vs jacrev", lambda: fgrad.jacfwd(f)(X), jr)
    check("jit(jacrev)", lambda: fgrad.jit(fgrad.jacrev(f))(X), jr)
    check("jit(jacfwd)", lambda: fgrad.jit(fgrad.jacfwd(f))(X), jr)
    check("jacrev(jit)", lambda: fgrad.jacrev(fgrad.jit(f))(X), jr)
    # per-example: vmap over a batch of points vs a loop
    xs = np.stack([x, x * 0.5 + 0.1, -x])
    g = fgrad.grad(lambda v: fnp.sum(f(v) * fnp.arange(1.0, 1.0 + np.size(f(X)))))
    ref = np.stack([np.asarray(g(fnp.asarray(v))) for v in xs])
    check("vmap(grad)", lambda: fgrad.vmap(g)(xs), ref)
    check("jit(vmap(grad))", lambda: fgrad.jit(fgrad.vmap(g))(xs), ref)
    check("vmap(jit(grad))", lambda: fgrad.vmap(fgrad.jit(g))(xs), ref)
    check("vmap(f)", lambda: fgrad.vmap(f)(xs), np.stack([np.asarray(f(fnp.asarray(v))) for v in xs]))
    # second order
    s = lambda v: fnp.sum(f(v) * fnp.arange(1.0, 1.0 + np.size(f(X))))  # noqa: E731
    try:
        h = fgrad.jacfwd(fgrad.jacrev(s))(X)
        check("hessian rev-rev", lambda: fgrad.jacrev(fgrad.jacrev(s))(X), h, 1e-7)
        check("hessian fwd-fwd", lambda: fgrad.jacfwd(fgrad.jacfwd(s))(X), h, 1e-7)
        check("jit hessian", lambda: fgrad.jit(fgrad.hessian(s))(X), h, 1e-7)
        check("vmap hessian", lambda: fgrad.vmap(fgrad.hessian(s))(xs)[0], h, 1e-7)
    except Exception as e:
        out.append(f"hessian RAISES {type(e).__name__}: {str(e)[:250]}")
    if smooth:
        eps = 1e-6
        fd = np.stack([(np.asarray(f(fnp.asarray(x + eps * e))) - np.asarray(f(fnp.asarray(x - eps * e))))
                       / (2 * eps) for e in np.eye(x.size)], axis=-1)
        m = tclose(jr, fd, 1e-5, 1e-6)
        if m:
            out.append(f"jacrev vs central differences: {m}")
    return out


def main():
    run_cases(CASES, run)


if __name__ == "__main__":
    main()
