"""fgrad.scipy.stats against scipy.stats: values on random and edge inputs for every
function of every distribution, derivatives (check_grads, order 2, forward and
reverse, float64) with respect to x and every float parameter, vmap against a
Python loop, jit against eager evaluation, and broadcasting of the arguments."""
import itertools
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
import scipy.stats as st

import fgrad
import fgrad.scipy.stats as fst
from fgrad.test_util import check_grads

CONTINUOUS = ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf")
DISCRETE = ("logpmf", "pmf", "cdf", "logcdf", "sf", "logsf", "ppf")
QUANTILE = ("ppf", "isf")


@dataclass
class Dist:
    """A distribution under test: `draw(rng, n, interior)` gives the arguments in
    SciPy's positional order (x, *shapes, loc[, scale]); `interior` keeps x inside
    the support and away from kinks, for derivatives. `edges` lists special values
    per argument; their Cartesian product is compared with SciPy, except where
    `deviations` documents a deliberate difference."""
    name: str
    scipy: object
    draw: Callable
    edges: tuple
    functions: tuple
    discrete: bool = False
    rtol: float = 1e-10
    deviations: Callable = None  # (fname, args, scipy's values) -> the values we give
    counts: tuple = ()  # argnums of integer parameters (not differentiated)
    series: dict = None  # fname -> argnums differentiated through special's slow series
    q_edges: tuple = (-0.1, 0.0, 1e-300, 0.3, 0.5, 1.0, 1.1, np.nan)  # for ppf and isf


    @property
    def module(self):
        return getattr(fst, self.name)


def _loc(rng, n):
    return rng.normal(0, 1, n)


def _scale(rng, n):
    return rng.uniform(0.5, 2.0, n)


def _location_scale(x_of_z):
    """draw() for a location-scale family whose standardized x is x_of_z(rng, n, interior)."""
    def draw(rng, n, interior):
        loc, scale = _loc(rng, n), _scale(rng, n)
        return loc + scale * x_of_z(rng, n, interior), loc, scale
    return draw


def _away_from(z, points, gap=0.05):
    for p in points:
        z = np.where(np.abs(z - p) < gap, p + gap * np.sign(z - p + 1e-300), z)
    return z


_X_EDGES = (-np.inf, -1.0, 0.0, 0.5, 1.0, 2.0, np.inf, np.nan)
_LOC_EDGES = (0.0, 1.0)
_SCALE_EDGES = (0.0, -1.0, 0.5, np.inf, np.nan)
_P_EDGES = (0.0, 0.3, 1.0, 1.5, -0.5, np.nan)
_K_EDGES = (-1.0, 0.0, 0.5, 1.0, 2.0, 3.0, np.inf, np.nan)
_SHAPE_EDGES = (0.0, -1.0, 0.5, 1.0, 2.5, np.nan)
_CDFS = ("cdf", "logcdf", "sf", "logsf", "ppf", "isf")


def _shaped(x_of_z, *shapes):
    """draw() for a family with shape parameters drawn by `shapes` (functions of
    rng, n); x_of_z(rng, n, interior, *shape values) gives the standardized x."""
    def draw(rng, n, interior):
        params = [s(rng, n) for s in shapes]
        loc, scale = _loc(rng, n), _scale(rng, n)
        return (loc + scale * x_of_z(rng, n, interior, *params), *params, loc, scale)
    return draw


def _discrete(k_range, *shapes, interior_k=None):
    """draw() for a discrete family: k an integer in k_range (in the support,
    from interior_k(rng, n, *shapes), for derivatives), loc 0 then."""
    def draw(rng, n, interior):
        params = [s(rng, n) for s in shapes]
        if interior:
            return (interior_k(rng, n, *params), *params, np.zeros(n))
        return (rng.integers(*k_range, n).astype(float), *params,
                rng.integers(-1, 2, n).astype(float))
    return draw


def _uniform(lo, hi):
    return lambda rng, n: rng.uniform(lo, hi, n)


def _scipy_logcdf_quirk(valid):
    """SciPy's discrete logcdf returns 0 at or above the top of the support even for
    invalid parameters (its cdf gives NaN there); ours gives NaN as everywhere else."""
    def deviations(fname, args, want):
        if fname == "logcdf":
            want = np.where(valid(*args[1:-1]), want, np.nan)
        return want
    return deviations


def _geom_deviations(fname, args, want):
    """And for p = 1 the ppf is 1 + loc on 0 < q < 1 (SciPy says loc, outside the support)."""
    want = _scipy_logcdf_quirk(lambda p: (p > 0) & (p <= 1))(fname, args, want)
    if fname == "ppf":
        q, p, loc = args
        want = np.where((p == 1) & (q > 0) & (q < 1), 1 + loc, want)
    return want


DISTS = [
    Dist("norm", st.norm, _location_scale(lambda rng, n, i: rng.normal(0, 2, n)),
         (_X_EDGES + (-40.0, 40.0), _LOC_EDGES, _SCALE_EDGES), CONTINUOUS),
    Dist("gamma", st.gamma,
         _shaped(lambda rng, n, i, a: rng.gamma(a) + 0.3 if i else rng.uniform(-1, 6, n),
                 _uniform(0.5, 4)),
         (_X_EDGES, _SHAPE_EDGES, _LOC_EDGES, _SCALE_EDGES), CONTINUOUS,
         series={f: (1,) for f in _CDFS}),
    Dist("chi2", st.chi2,
         _shaped(lambda rng, n, i, df: rng.chisquare(df) + 0.3 if i else rng.uniform(-1, 9, n),
                 _uniform(1, 8)),
         (_X_EDGES, _SHAPE_EDGES, _LOC_EDGES, _SCALE_EDGES), CONTINUOUS,
         series={f: (1,) for f in _CDFS}),
    Dist("beta", st.beta,
         _shaped(lambda rng, n, i, a, b: rng.uniform(0.05, 0.95, n) if i
                 else rng.uniform(-0.3, 1.3, n), _uniform(0.5, 4), _uniform(0.5, 4)),
         (_X_EDGES, _SHAPE_EDGES, _SHAPE_EDGES, _LOC_EDGES, (0.0, 0.5, np.nan)),
         CONTINUOUS, series={f: (1, 2) for f in _CDFS}),
    Dist("t", st.t,
         _shaped(lambda rng, n, i, df: _away_from(rng.standard_t(df), [0]), _uniform(0.5, 10)),
         (_X_EDGES + (-1e10, 1e-5), _SHAPE_EDGES + (np.inf, 1e5), _LOC_EDGES, _SCALE_EDGES),
         CONTINUOUS, series={f: (1,) for f in _CDFS},
         q_edges=(-0.1, 0.0, 1e-30, 0.3, 0.5, 1.0, 1.1, np.nan)),  # no overflow of z^2
    Dist("expon", st.expon,
         _location_scale(lambda rng, n, i: rng.uniform(0.05, 4, n) if i else rng.uniform(-1, 4, n)),
         (_X_EDGES, _LOC_EDGES, _SCALE_EDGES), CONTINUOUS),
    Dist("laplace", st.laplace,
         _location_scale(lambda rng, n, i: _away_from(rng.normal(0, 3, n), [0])),
         (_X_EDGES, _LOC_EDGES, _SCALE_EDGES), CONTINUOUS),
    Dist("cauchy", st.cauchy, _location_scale(lambda rng, n, i: rng.standard_cauchy(n)),
         (_X_EDGES + (-1e20, 1e20), _LOC_EDGES, _SCALE_EDGES), CONTINUOUS),
    Dist("logistic", st.logistic, _location_scale(lambda rng, n, i: rng.logistic(0, 3, n)),
         (_X_EDGES + (-800.0, 800.0), _LOC_EDGES, _SCALE_EDGES), CONTINUOUS),
    Dist("uniform", st.uniform,
         _location_scale(lambda rng, n, i: rng.uniform(0.05, 0.95, n) if i
                         else rng.uniform(-0.5, 1.5, n)),
         (_X_EDGES, _LOC_EDGES, _SCALE_EDGES), CONTINUOUS),
    Dist("bernoulli", st.bernoulli,
         lambda rng, n, i: (rng.integers(0 if i else -1, 2 if i else 3, n).astype(float),
                            rng.uniform(0.05, 0.95, n), np.zeros(n) if i else
                            rng.integers(-1, 2, n).astype(float)),
         (_K_EDGES, _P_EDGES, _LOC_EDGES), DISCRETE, discrete=True,
         deviations=_scipy_logcdf_quirk(lambda p: (p >= 0) & (p <= 1))),
    Dist("geom", st.geom,
         lambda rng, n, i: (rng.integers(1 if i else -1, 8, n).astype(float),
                            rng.uniform(0.05, 0.95, n), np.zeros(n) if i else
                            rng.integers(-1, 2, n).astype(float)),
         (_K_EDGES, _P_EDGES, _LOC_EDGES), DISCRETE, discrete=True, deviations=_geom_deviations),
]
DISTS += [
    Dist("poisson", st.poisson,
         _discrete((-1, 14), _uniform(0.5, 8),
                   interior_k=lambda rng, n, mu: rng.integers(0, 10, n).astype(float)),
         (_K_EDGES + (25.0,), (0.0, -1.0, 0.5, 3.0, np.inf, np.nan), _LOC_EDGES), DISCRETE,
         discrete=True, deviations=_scipy_logcdf_quirk(lambda mu: mu >= 0)),
    Dist("binom", st.binom,
         _discrete((-1, 12), lambda rng, n: rng.integers(0, 11, n).astype(float),
                   _uniform(0.1, 0.9),
                   interior_k=lambda rng, n, m, p: np.floor(rng.uniform(0, 1, n) * (m + 1))),
         (_K_EDGES, (0.0, 1.0, 5.0, 2.5, -1.0, np.nan), _P_EDGES, _LOC_EDGES), DISCRETE,
         discrete=True, counts=(1,), deviations=_scipy_logcdf_quirk(
             lambda n, p: (n >= 0) & (n == np.floor(n)) & (p >= 0) & (p <= 1))),
    Dist("nbinom", st.nbinom,
         _discrete((-1, 14), _uniform(0.5, 5), _uniform(0.1, 0.9),
                   interior_k=lambda rng, n, m, p: rng.integers(0, 8, n).astype(float)),
         (_K_EDGES, _SHAPE_EDGES, _P_EDGES, _LOC_EDGES), DISCRETE, discrete=True,
         series={f: (1,) for f in _CDFS[:4]},
         
         deviations=_scipy_logcdf_quirk(lambda n, p: (n > 0) & (p > 0) & (p <= 1))),
]
_BY_NAME = {d.name: d for d in DISTS}
_FUNCS = [(d.name, f) for d in DISTS for f in d.functions]


def _quantile_args(args, rng, interior):
    """args with x replaced by probabilities (for ppf/isf); for derivatives (by
    finite differences) not too close to 0 or 1."""
    lo = 0.1 if interior else 0.02
    return (rng.uniform(lo, 1 - lo, np.shape(args[0])),) + tuple(args[1:])


def _args(dist, fname, rng, n=50, interior=False):
    args = dist.draw(rng, n, interior)
    if fname in QUANTILE:
        args = _quantile_args(args, rng, interior)
    return args


def _both(dist, fname):
    """Our function and SciPy's reference. SciPy's logcdf (logsf) of several families
    is log(cdf), which loses all accuracy where the cdf is near 1; the reference
    there is log1p(-sf) (log1p(-cdf)) from SciPy's accurate other tail."""
    ours, theirs = getattr(dist.module, fname), getattr(dist.scipy, fname)
    if fname in ("logcdf", "logsf"):
        near_one, other = ((dist.scipy.cdf, dist.scipy.sf) if fname == "logcdf"
                           else (dist.scipy.sf, dist.scipy.cdf))

        def reference(*args):
            with np.errstate(divide="ignore"):
                return np.where(near_one(*args) > 0.5, np.log1p(-other(*args)), theirs(*args))
        return ours, reference
    return ours, theirs


def _assert_matches(got, want, rtol):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    assert got.dtype == np.float64, got.dtype
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-300)


def test_each_module_has_its_functions():
    for d in DISTS:
        public = {n for n in vars(d.module) if not n.startswith("_")}
        assert public == set(d.functions), (d.name, public ^ set(d.functions))


@pytest.mark.parametrize("name,fname", _FUNCS)
def test_values_match_scipy(name, fname):
    dist = _BY_NAME[name]
    ours, theirs = _both(dist, fname)
    args = _args(dist, fname, np.random.default_rng(0))
    _assert_matches(ours(*args), theirs(*args), dist.rtol)


@pytest.mark.parametrize("name,fname", _FUNCS)
def test_edge_values_match_scipy(name, fname):
    dist = _BY_NAME[name]
    ours, theirs = _both(dist, fname)
    edges = list(dist.edges)
    if fname in QUANTILE:
        edges[0] = dist.q_edges
    args = [np.array(a) for a in zip(*itertools.product(*edges))]
    with np.errstate(all="ignore"):  # inf - inf and 0 * inf are expected here
        want, got = theirs(*args), ours(*args)
    if dist.deviations:
        want = dist.deviations(fname, args, want)
    _assert_matches(got, want, dist.rtol)


def _differentiable(dist, fname, args):
    """argnums to differentiate: everything for continuous families; for discrete
    ones the float shape parameters (not the count k, nor loc, which only shifts
    it), and for a discrete ppf (a step function of q and the shapes) loc; never
    the integer parameters, nor (here) those differentiated through the series of
    fgrad.scipy.special's incomplete gamma/beta functions (see below)."""
    if not dist.discrete:
        argnums = range(len(args))
    elif fname == "ppf":
        argnums = (len(args) - 1,)
    else:
        argnums = range(1, len(args) - 1)
    skip = set(dist.counts) | set((dist.series or {}).get(fname, ()))
    return tuple(i for i in argnums if i not in skip)


@pytest.mark.parametrize("name,fname", _FUNCS)
def test_gradients(name, fname):
    dist = _BY_NAME[name]
    fn = getattr(dist.module, fname)
    args = _args(dist, fname, np.random.default_rng(1), n=6, interior=True)
    if dist.discrete:  # where a log-probability is -inf (k at or beyond an end) it is flat
        finite = np.isfinite(np.asarray(fn(*args)))
        assert finite.sum() >= 2
        args = tuple(a[finite] for a in args)
    argnums = _differentiable(dist, fname, args)
    def partial(*diff):
        full = list(args)
        for i, v in zip(argnums, diff):
            full[i] = v
        return fn(*full)
    check_grads(partial, [args[i] for i in argnums], order=2)


def _check_shape_derivatives(dist, fname, argnums, **kwargs):
    fn = getattr(dist.module, fname)
    args = _args(dist, fname, np.random.default_rng(13), n=2, interior=True)

    def partial(*shapes):
        full = list(args)
        for i, v in zip(argnums, shapes):
            full[i] = v
        return fn(*full)
    check_grads(partial, [args[i] for i in argnums], **kwargs)


_SERIES = [(d.name, f, nums) for d in DISTS for f, nums in (d.series or {}).items()
           if f in d.functions]


_QUICK = {("gamma", "cdf"), ("gamma", "ppf"), ("beta", "cdf"), ("nbinom", "cdf")}


@pytest.mark.parametrize("name,fname,argnums", [c for c in _SERIES if c[:2] in _QUICK])
def test_shape_derivatives(name, fname, argnums):
    """Derivatives in the shape parameters of the cdf family come from
    fgrad.scipy.special's series for the incomplete gamma/beta functions (600
    loop steps each, about 0.5 s per evaluation eagerly): a few first-order
    forward-mode checks here; every function (t's too) to second order in both
    modes under -m slow."""
    _check_shape_derivatives(_BY_NAME[name], fname, argnums, order=1, modes="fwd")


@pytest.mark.slow
@pytest.mark.parametrize("name,fname,argnums", _SERIES)
def test_shape_derivatives_second_order(name, fname, argnums):
    _check_shape_derivatives(_BY_NAME[name], fname, argnums, order=2)


@pytest.mark.parametrize("name", _BY_NAME)
def test_vmap_equals_loop(name):
    dist = _BY_NAME[name]
    for fname in dist.functions:
        fn = getattr(dist.module, fname)
        args = _args(dist, fname, np.random.default_rng(2), n=3)
        rows = np.stack([np.asarray(fn(*(a[i] for a in args))) for i in range(3)])
        np.testing.assert_array_equal(np.asarray(fgrad.vmap(fn)(*args)), rows)


@pytest.mark.parametrize("name", _BY_NAME)
def test_jit_equals_eager(name):
    """All of a family's functions in one jitted program (one compile)."""
    dist = _BY_NAME[name]
    rng = np.random.default_rng(3)
    fns = [getattr(dist.module, f) for f in dist.functions]
    args = [_args(dist, f, rng, n=20) for f in dist.functions]

    def every(all_args):
        return [fn(*a) for fn, a in zip(fns, all_args)]
    for got, want in zip(fgrad.jit(every)(args), every(args)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-13, atol=1e-300)


@pytest.mark.parametrize("name", _BY_NAME)
def test_broadcasting_and_float32(name):
    dist = _BY_NAME[name]
    rng = np.random.default_rng(4)
    for fname in dist.functions:
        ours, theirs = _both(dist, fname)
        args = _args(dist, fname, rng, n=6)
        shaped = [a.reshape((6,) + (1,) * i)[: 6 - i] for i, a in enumerate(args)]
        _assert_matches(ours(*shaped), theirs(*shaped), dist.rtol)
        out32 = np.asarray(ours(*(a.astype(np.float32) for a in args)))
        assert out32.dtype == np.float32
        np.testing.assert_allclose(out32, theirs(*args), rtol=2e-4, atol=1e-30)


# ----------------------------------------------------------------------------
# multivariate_normal (x's last axis is the event; leading axes batch)

def _spd(rng, dim, batch=()):
    a = rng.normal(size=batch + (dim, dim))
    return a @ np.swapaxes(a, -1, -2) + dim * np.eye(dim)


def test_multivariate_normal_matches_scipy():
    rng = np.random.default_rng(5)
    x, mean, cov = rng.normal(size=(4, 3)), rng.normal(size=3), _spd(rng, 3)
    mvn = st.multivariate_normal
    for c in (cov, 2.5, np.diag(cov)):
        _assert_matches(fst.multivariate_normal.logpdf(x, mean, c), mvn.logpdf(x, mean, c), 1e-12)
        _assert_matches(fst.multivariate_normal.pdf(x, mean, c), mvn.pdf(x, mean, c), 1e-12)
    _assert_matches(fst.multivariate_normal.logpdf(x[0], mean, cov), mvn.logpdf(x[0], mean, cov),
                    1e-12)
    _assert_matches(fst.multivariate_normal.logpdf(x, None, cov), mvn.logpdf(x, None, cov), 1e-12)
    _assert_matches(fst.multivariate_normal.logpdf(x[:, 0], np.float64(0.5), np.float64(2.0)),
                    mvn.logpdf(x[:, 0], 0.5, 2.0), 1e-12)
    out32 = fst.multivariate_normal.logpdf(*(np.float32(a) for a in (x, mean, cov)))
    assert out32.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out32), mvn.logpdf(x, mean, cov), rtol=1e-5)


def test_multivariate_normal_batches_like_jax():
    rng = np.random.default_rng(6)
    x, means, covs = rng.normal(size=(5, 1, 3)), rng.normal(size=(2, 3)), _spd(rng, 3, (2,))
    got = np.asarray(fst.multivariate_normal.logpdf(x, means, covs))
    want = [[st.multivariate_normal.logpdf(x[i, 0], means[j], covs[j]) for j in range(2)]
            for i in range(5)]
    _assert_matches(got, np.array(want), 1e-12)


def test_multivariate_normal_invalid_cov():
    x = np.zeros(2)
    assert np.isnan(fst.multivariate_normal.logpdf(x, x, np.array([[1.0, 2.0], [2.0, 1.0]])))
    assert np.isnan(fst.multivariate_normal.logpdf(x, x, np.array([1.0, -1.0])))
    with pytest.raises(NotImplementedError, match="allow_singular"):
        fst.multivariate_normal.logpdf(x, x, np.eye(2), allow_singular=True)
    with pytest.raises(ValueError, match=r"cov must be \(2, 2\)"):
        fst.multivariate_normal.logpdf(x, x, np.eye(3))


@pytest.mark.parametrize("cov_kind", ["full", "batched", "diagonal"])
def test_multivariate_normal_gradients(cov_kind):
    rng = np.random.default_rng(7)
    x, mean = rng.normal(size=(2, 3)), rng.normal(size=3)
    cov = {"full": _spd(rng, 3), "batched": _spd(rng, 3, (2,)),
           "diagonal": rng.uniform(0.5, 2, 3)}[cov_kind]
    check_grads(fst.multivariate_normal.logpdf, (x, mean, cov), order=2)


def test_multivariate_normal_cov_gradient_is_symmetric():
    rng = np.random.default_rng(8)
    x, mean, cov = rng.normal(size=3), rng.normal(size=3), _spd(rng, 3)
    g = np.asarray(fgrad.grad(fst.multivariate_normal.logpdf, argnums=2)(x, mean, cov))
    inv, d = np.linalg.inv(cov), x - mean  # d/dcov = (inv d d^T inv - inv) / 2
    np.testing.assert_allclose(g, 0.5 * (inv @ np.outer(d, d) @ inv - inv), rtol=1e-10)


def test_multivariate_normal_vmap_and_jit():
    rng = np.random.default_rng(9)
    x, mean, cov = rng.normal(size=(4, 3)), rng.normal(size=(4, 3)), _spd(rng, 3, (4,))
    fn = fst.multivariate_normal.logpdf
    loop = np.stack([np.asarray(fn(x[i], mean[i], cov[i])) for i in range(4)])
    np.testing.assert_allclose(np.asarray(fgrad.vmap(fn)(x, mean, cov)), loop, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(fgrad.vmap(fn, (0, None, None))(x, mean[0], cov[0])),
                               np.asarray(fn(x, mean[0], cov[0])), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(fgrad.jit(fn)(x, mean, cov)),
                               np.asarray(fn(x, mean, cov)), rtol=1e-13)


# ----------------------------------------------------------------------------
# dirichlet (SciPy's layout: components along x's first axis)

def _simplex(rng, k, n):
    return rng.dirichlet(np.full(k, 5.0), n).T  # (k, n), components well inside (0, 1)


def test_dirichlet_matches_scipy():
    rng = np.random.default_rng(10)
    alpha, x = rng.uniform(0.5, 3, 4), _simplex(rng, 4, 6)
    for xs in (x, x[:, 0], x[:-1]):
        _assert_matches(fst.dirichlet.logpdf(xs, alpha), st.dirichlet.logpdf(xs, alpha), 1e-12)
        _assert_matches(fst.dirichlet.pdf(xs, alpha), st.dirichlet.pdf(xs, alpha), 1e-12)
    edge = np.array([0.0, 0.25, 0.75])  # a zero component: finite or 0 by alpha ...
    for a in ([1.0, 1, 2], [2.0, 1, 2]):
        _assert_matches(fst.dirichlet.logpdf(edge, np.array(a)),
                        st.dirichlet.logpdf(edge, np.array(a)), 1e-12)
    # ... and inf for alpha < 1, where SciPy raises
    assert fst.dirichlet.logpdf(edge, np.array([0.5, 1, 2])) == np.inf
    out32 = fst.dirichlet.logpdf(np.float32(x), np.float32(alpha))
    assert out32.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out32), st.dirichlet.logpdf(x, alpha), rtol=1e-5)


def test_dirichlet_outside_the_simplex_and_invalid_alpha():
    alpha = np.array([1.5, 2.0, 0.7])
    outside = np.array([[0.2, 0.5, 0.3 + 1e-6], [-0.1, 0.6, 0.5], [0.2, 0.3, 0.5]]).T
    got = np.asarray(fst.dirichlet.logpdf(outside, alpha))
    assert got[0] == -np.inf and got[1] == -np.inf and np.isfinite(got[2])
    assert np.isnan(fst.dirichlet.logpdf(np.array([0.2, np.nan, 0.5]), alpha))
    assert np.isnan(fst.dirichlet.logpdf(outside[:, 2], np.array([1.0, 0.0, 2.0])))
    with pytest.raises(ValueError, match="alpha must be a vector"):
        fst.dirichlet.logpdf(outside, np.ones((3, 1)))
    with pytest.raises(ValueError, match="3 or 2 components"):
        fst.dirichlet.logpdf(np.ones(5) / 5, alpha)


def test_dirichlet_gradients():
    """Through the (K-1)-component form, so finite differences stay on the simplex."""
    rng = np.random.default_rng(11)
    alpha, x = rng.uniform(0.5, 3, 4), _simplex(rng, 4, 3)[:-1]
    check_grads(fst.dirichlet.logpdf, (x, alpha), order=2)


def test_dirichlet_vmap_and_jit():
    rng = np.random.default_rng(12)
    alpha, x = rng.uniform(0.5, 3, (5, 3)), _simplex(rng, 3, 5).T  # vmap over rows
    fn = fst.dirichlet.logpdf
    loop = np.stack([np.asarray(fn(x[i], alpha[i])) for i in range(5)])
    np.testing.assert_array_equal(np.asarray(fgrad.vmap(fn)(x, alpha)), loop)
    np.testing.assert_allclose(np.asarray(fgrad.jit(fn)(x.T, alpha[0])),
                               np.asarray(fn(x.T, alpha[0])), rtol=1e-13)


def test_t_cdf_derivatives_at_the_median():
    """The incomplete-beta formula's slope is inf * 0 at x = loc; the custom rule
    gives the density there, to second order."""
    x, df, loc, scale = np.array([0.7, 1.3]), np.array([2.5, 7.0]), np.array([0.7, 1.3]), 1.5
    for fname in ("cdf", "sf", "logcdf", "logsf"):
        fn = getattr(fst.t, fname)
        check_grads(lambda x, loc: fn(x, df, loc, scale), (x, loc), order=2)
    g = fgrad.grad(lambda x: fst.t.cdf(x, df, loc, scale).sum())(x)
    np.testing.assert_allclose(np.asarray(g), st.t.pdf(x, df, loc, scale), rtol=1e-12)
