"""The NaN/Inf origin finder: config debug_nans / FGRAD_DEBUG_NANS."""
import inspect
import os
import subprocess
import sys

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad.debug import DebugNansError

THIS_FILE = os.path.basename(__file__)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def debug_nans():
    fgrad.config.update("debug_nans", True)
    yield
    fgrad.config.update("debug_nans", False)


def _line_of(fn, text):
    """The line number of the line of fn's source that contains `text`."""
    lines, first = inspect.getsourcelines(fn)
    (offset,) = [i for i, line in enumerate(lines) if text in line]
    return first + offset


def log_times_zero(x):
    y = fnp.log(x)
    return (y * 0.0).sum()


def sqrt_in_where(x):
    safe = x > 0
    return fnp.where(safe, fnp.sqrt(x), 0.0).sum()


def sqrt_double_where(x):
    safe = x > 0
    return fnp.where(safe, fnp.sqrt(fnp.where(safe, x, 1.0)), 0.0).sum()


X = np.array([1.0, 0.0, 4.0])


# ----------------------------------------------------------------------------
# Forward pass

@pytest.mark.parametrize("transform,x", [
    (lambda f: f, X), (fgrad.jit, X), (fgrad.grad, X),
    (lambda f: fgrad.vmap(f, in_axes=1), X[:, None]),
    (lambda f: fgrad.jit(fgrad.grad(f)), X)])
def test_forward_log_of_zero(debug_nans, transform, x):
    with pytest.raises(DebugNansError) as info:
        transform(log_times_zero)(x)
    e = info.value
    assert isinstance(e, FloatingPointError)
    assert e.primitive == "log"
    line = _line_of(log_times_zero, "fnp.log(x)")
    assert e.source_info.line == line and not e.source_info.backward
    msg = str(e)
    assert f"{THIS_FILE}:{line}" in msg
    assert "y = fnp.log(x)" in msg          # the source text
    assert "f64[" in msg                    # the input's type
    assert "log(0.0) = -inf" in msg         # an offending element and its input


def test_message_lists_indices_and_inputs(debug_nans):
    with pytest.raises(DebugNansError) as info:
        fnp.divide(np.array([[1.0, 0.0], [0.0, 2.0]]), np.array([1.0, 0.0]))
    msg = str(info.value)
    assert "div produced NaN and Inf from finite inputs" in msg
    assert "inputs: f64[2,2], f64[2]" in msg
    assert "at index (0, 1): div(0.0, 0.0) = nan" in msg
    assert "at index (1, 1): div(2.0, 0.0) = inf" in msg


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_off_by_default_returns_nan():
    assert not fgrad.config.debug_nans
    assert np.isnan(np.asarray(log_times_zero(X)))
    assert np.isnan(np.asarray(fgrad.grad(sqrt_in_where)(X))).any()


# ----------------------------------------------------------------------------
# Backward pass: the NaN appears only there

def test_where_trap_forward_is_clean(debug_nans):
    np.testing.assert_allclose(sqrt_in_where(X), 3.0)
    np.testing.assert_allclose(fgrad.jit(sqrt_in_where)(X), 3.0)


@pytest.mark.parametrize("transform", [
    fgrad.grad,
    lambda f: fgrad.jit(fgrad.grad(f)),
    lambda f: fgrad.grad(fgrad.jit(f)),
    lambda f: (lambda x: fgrad.vjp(f, x)[1](np.float64(1.0))),
])
def test_backward_nan_names_the_forward_line(debug_nans, transform):
    with pytest.raises(DebugNansError) as info:
        transform(sqrt_in_where)(X)
    e = info.value
    line = _line_of(sqrt_in_where, "fnp.sqrt(x)")
    assert e.source_info.line == line and e.source_info.backward
    assert os.path.basename(e.source_info.file) == THIS_FILE
    msg = str(e)
    assert "backward pass" in msg and f"{THIS_FILE}:{line}" in msg
    assert "NaN" in msg and "double-where" in msg


def test_double_where_fix(debug_nans):
    g = fgrad.grad(sqrt_double_where)(X)
    np.testing.assert_allclose(g, [0.5, 0.0, 0.25])
    np.testing.assert_allclose(fgrad.jit(fgrad.grad(sqrt_double_where))(X), [0.5, 0.0, 0.25])


def test_double_where_gradients():
    from fgrad.test_util import check_grads
    check_grads(sqrt_double_where, (np.array([1.0, -2.0, 4.0]),), order=2, modes=("fwd", "rev"))


# ----------------------------------------------------------------------------
# No false alarms

@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_nan_inputs_do_not_raise(debug_nans):
    x = np.array([np.nan, 1.0, np.inf])
    assert np.isnan(np.asarray(fnp.sin(x))).any()
    assert np.isnan(np.asarray(fgrad.jit(lambda v: fnp.sin(v) * 2.0)(x))).any()
    fgrad.grad(lambda v: (v * v).sum())(x)


def test_finite_results_do_not_raise(debug_nans):
    fgrad.grad(lambda v: fnp.tanh(v).sum())(X)
    fgrad.jit(fgrad.grad(lambda v: (fnp.exp(v) * v).sum()))(X)
    fnp.isnan(np.array([1.0, 2.0]))      # integer/bool outputs are never checked


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_turning_it_off_again():
    fgrad.config.update("debug_nans", True)
    fgrad.config.update("debug_nans", False)
    assert np.isnan(np.asarray(log_times_zero(X)))


def test_env_var_turns_it_on():
    code = ("import numpy as np, fgrad, fgrad.numpy as fnp\n"
            "try:\n"
            "    fnp.log(np.zeros(2))\n"
            "except fgrad.debug.DebugNansError as e:\n"
            "    print('caught', e.primitive)\n")
    env = dict(os.environ, FGRAD_DEBUG_NANS="1", PYTHONPATH=REPO)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.stdout.strip() == "caught log", out.stderr


def test_where_trap_example_runs(capsys):
    import runpy
    runpy.run_path(os.path.join(REPO, "examples", "where_nan_trap.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "div produced NaN" in out and "backward pass" in out and "where_nan_trap.py:" in out
    assert "grad fixed(x)    = [0.25 0.   0.5 ]" in out
    assert not fgrad.config.debug_nans
