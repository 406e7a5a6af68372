"""Runs real array-API code from scikit-learn and SciPy on fgrad arrays and on NumPy
arrays, and prints both results as JSON (used by tests/test_array_api.py).

A separate process because SciPy reads SCIPY_ARRAY_API when first imported, and
scikit-learn's array_api_dispatch needs it set.
"""
import json
import os
import sys

os.environ["SCIPY_ARRAY_API"] = "1"

import numpy as np  # noqa: E402
import scipy.special  # noqa: E402
import scipy.stats  # noqa: E402
import sklearn  # noqa: E402
from sklearn import metrics  # noqa: E402
from sklearn.metrics import pairwise  # noqa: E402

import fgrad  # noqa: E402
import fgrad.array_api as xp  # noqa: E402

sklearn.set_config(array_api_dispatch=True)
rng = np.random.default_rng(0)
y_true = rng.uniform(0.5, 2.0, 40)
y_pred = y_true + 0.1 * rng.normal(size=40)
labels_true = rng.integers(0, 3, 40)
labels_pred = np.where(rng.random(40) < 0.8, labels_true, rng.integers(0, 3, 40))
features = np.abs(rng.normal(size=(12, 4)))
sample = rng.normal(size=(30, 3))


def floats(a):
    return xp.asarray(a, dtype=xp.float64)


def ints(a):
    return xp.asarray(a, dtype=xp.int32)


# name -> (function, NumPy arguments, converter to fgrad arrays)
CASES = {
    "sklearn.metrics.mean_squared_error": (metrics.mean_squared_error, (y_true, y_pred), floats),
    "sklearn.metrics.mean_absolute_error": (metrics.mean_absolute_error, (y_true, y_pred), floats),
    "sklearn.metrics.mean_absolute_percentage_error": (
        metrics.mean_absolute_percentage_error, (y_true, y_pred), floats),
    "sklearn.metrics.mean_pinball_loss": (metrics.mean_pinball_loss, (y_true, y_pred), floats),
    "sklearn.metrics.d2_tweedie_score": (metrics.d2_tweedie_score, (y_true, y_pred), floats),
    "sklearn.metrics.max_error": (metrics.max_error, (y_true, y_pred), floats),
    "sklearn.metrics.median_absolute_error": (
        metrics.median_absolute_error, (y_true, y_pred), floats),
    "sklearn.metrics.confusion_matrix": (
        metrics.confusion_matrix, (labels_true, labels_pred), ints),
    "sklearn.metrics.hamming_loss": (metrics.hamming_loss, (labels_true, labels_pred), ints),
    "sklearn.metrics.pairwise.linear_kernel": (pairwise.linear_kernel, (features,), floats),
    "sklearn.metrics.pairwise.polynomial_kernel": (
        pairwise.polynomial_kernel, (features,), floats),
    "sklearn.metrics.pairwise.chi2_kernel": (pairwise.chi2_kernel, (features,), floats),
    "scipy.stats.skew": (scipy.stats.skew, (sample,), floats),
    "scipy.stats.kurtosis": (scipy.stats.kurtosis, (sample,), floats),
    "scipy.stats.moment": (lambda a: scipy.stats.moment(a, 3), (sample,), floats),
    "scipy.stats.ttest_1samp": (lambda a: scipy.stats.ttest_1samp(a, 0.0).statistic,
                                (sample,), floats),
    "scipy.special.softmax": (lambda a: scipy.special.softmax(a, axis=1), (sample,), floats),
}


def plain(value):
    """A JSON-ready (type name, nested list) for a result."""
    kind = "fgrad.Array" if isinstance(value, fgrad.Array) else type(value).__name__
    return kind, np.asarray(value, dtype=np.float64).tolist()


def run_cases():
    out = {}
    for name, (fn, args, convert) in CASES.items():
        kind, ours = plain(fn(*[convert(a) for a in args]))
        out[name] = {"type": kind, "ours": ours, "numpy": plain(fn(*args))[1]}
    return out


def transforms():
    """scipy.stats.skew under fgrad.jit and fgrad.grad (against central differences)."""
    x = floats(sample[:, 0])
    skew = scipy.stats.skew
    grad = np.asarray(fgrad.grad(skew)(x))
    h, fd = 1e-6, []
    for i in range(3):
        e = np.zeros(x.shape)
        e[i] = h
        fd.append((float(skew(x + floats(e))) - float(skew(x - floats(e)))) / (2 * h))
    return {"jit": float(fgrad.jit(skew)(x)), "eager": float(skew(x)),
            "grad": grad[:3].tolist(), "finite_differences": fd}


if __name__ == "__main__":
    json.dump({"cases": run_cases(), "transforms": transforms()}, sys.stdout)
