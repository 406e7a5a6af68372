"""Errors raised through transforms show the user's frames, not fgrad's."""
import os
import subprocess
import sys
import traceback

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp

FGRAD_DIR = os.path.dirname(os.path.abspath(fgrad.__file__)) + os.sep
REPO = os.path.dirname(FGRAD_DIR.rstrip(os.sep))


def _frames(e):
    return [(f.f_code.co_filename, f.f_code.co_name) for f, _ in traceback.walk_tb(e.__traceback__)]


def _internal(filename):
    return filename.startswith(FGRAD_DIR)


def bad_matmul(x):
    return (x @ np.ones((4, 2))).sum()          # x has 3 elements: a shape error


def raises_itself(x):
    raise ValueError("the user's own error")


TRANSFORMS = {
    "grad": lambda f: fgrad.grad(f),
    "value_and_grad": lambda f: fgrad.value_and_grad(f),
    "jit": lambda f: fgrad.jit(f),
    "vmap": lambda f: (lambda x: fgrad.vmap(f)(x[None])),
    "jvp": lambda f: (lambda x: fgrad.jvp(f, (x,), (x,))),
    "vjp": lambda f: (lambda x: fgrad.vjp(f, x)),
    "linearize": lambda f: (lambda x: fgrad.linearize(f, x)),
    "make_jaxpr": lambda f: fgrad.make_jaxpr(f),
    "jacrev": lambda f: fgrad.jacrev(f),
    "jacfwd": lambda f: fgrad.jacfwd(f),
    "jit_of_grad_of_vmap": lambda f: fgrad.jit(fgrad.grad(
        lambda x: fgrad.vmap(f)(x[None]).sum())),
}


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
@pytest.mark.parametrize("fun", [bad_matmul, raises_itself])
def test_traceback_ends_in_user_code(name, fun):
    with pytest.raises((TypeError, ValueError)) as info:
        TRANSFORMS[name](fun)(np.ones(3))
    frames = _frames(info.value)
    # The innermost frame is this file's function that made the error ...
    assert frames[-1] == (__file__, fun.__name__)
    # ... and the only fgrad frame left is the outermost transform's entry point.
    internal = [i for i, (file, _) in enumerate(frames) if _internal(file)]
    # (grad and value_and_grad are their own boundary, as a jitted function is)
    entry_points = ("boundary", "__call__", "value_and_grad_f")
    assert len(internal) == 1 and frames[internal[0]][1] in entry_points, frames
    assert frames[0] == (__file__, "test_traceback_ends_in_user_code")


def test_message_type_and_one_note():
    with pytest.raises(TypeError) as info:
        TRANSFORMS["jit_of_grad_of_vmap"](bad_matmul)(np.ones(3))
    e = info.value
    assert type(e) is fgrad.FgradTypeError
    assert "(3,)" in str(e) or "f64[3]" in str(e)
    notes = [n for n in getattr(e, "__notes__", []) if "FGRAD_TRACEBACK_FILTERING" in n]
    assert len(notes) == 1


def test_filtering_can_be_turned_off():
    fgrad.config.update("traceback_filtering", False)
    try:
        with pytest.raises(TypeError) as info:
            fgrad.grad(bad_matmul)(np.ones(3))
    finally:
        fgrad.config.update("traceback_filtering", True)
    frames = _frames(info.value)
    assert sum(_internal(file) for file, _ in frames) > 3
    assert _internal(frames[-1][0])   # the error is raised inside fgrad's shape rule


@pytest.mark.parametrize("value,expect_internal", [(None, False), ("off", True)])
def test_env_var_keeps_internal_frames(value, expect_internal):
    code = ("import traceback, numpy as np, fgrad\n"
            "def f(x):\n"
            "    return (x @ np.ones((4, 2))).sum()\n"
            "try:\n"
            "    fgrad.jit(f)(np.ones(3))\n"
            "except TypeError as e:\n"
            "    for fr, _ in traceback.walk_tb(e.__traceback__):\n"
            "        print(fr.f_code.co_filename)\n")
    env = dict(os.environ, PYTHONPATH=REPO)
    env.pop("FGRAD_TRACEBACK_FILTERING", None)
    if value is not None:
        env["FGRAD_TRACEBACK_FILTERING"] = value
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    files = out.stdout.split()
    assert files, out.stderr
    assert _internal(files[-1]) == expect_internal
    assert (sum(_internal(f) for f in files) > 1) == expect_internal
    assert "<string>" in files


def test_successful_calls_are_unchanged():
    np.testing.assert_allclose(fgrad.grad(lambda x: (x * x).sum())(np.ones(3)), 2 * np.ones(3))
    assert fgrad.grad.__name__ == "grad" and fgrad.vjp.__name__ == "vjp"
    assert fgrad.jit(fnp.sin)(np.float64(0.0)) == 0.0
