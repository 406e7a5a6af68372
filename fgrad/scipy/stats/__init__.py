"""fgrad.scipy.stats: SciPy's probability distributions as functions, one module per
family (JAX's layout), e.g. `fgrad.scipy.stats.norm.logpdf(x, loc=0, scale=1)`.

Arguments broadcast together and follow SciPy's conventions: `loc` and `scale`
for continuous families, `loc` for discrete ones, shape parameters by SciPy's
names. Outside the support a log-density is -inf (a density 0); invalid parameters
give NaN. Every function is written with fgrad operations, so it differentiates
(with respect to x and every float parameter), vmaps and jits.
"""
from . import (bernoulli, beta, binom, cauchy, chi2, dirichlet, expon, gamma,  # noqa: F401
               geom, laplace, logistic, multivariate_normal, nbinom, norm, poisson, t,
               uniform)

__all__ = ["bernoulli", "beta", "binom", "cauchy", "chi2", "dirichlet", "expon", "gamma", "geom",
           "laplace", "logistic", "multivariate_normal", "nbinom", "norm", "poisson", "t",
           "uniform"]
