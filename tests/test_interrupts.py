"""A signal during a long native loop (scan, fori_loop, while_loop) is handled
within about 0.1 s, not when the loop ends: Ctrl-C raises KeyboardInterrupt at
the call, a handler that returns lets the loop finish, and the process (and
the interrupted function) works afterwards."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import lax

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="POSIX signals")

LONG = 100_000_000        # iterations: a second or more of work on any machine


def step(c):
    return c * 0.999 + fnp.sin(c) * 1e-3


def loops():
    """name -> jitted f(x, n): n iterations of `step` in a native loop, giving x
    after them (countdown: also the count, 0, so the program is the loop alone and
    the native dispatcher serves its calls with array arguments)."""
    return {
        "countdown": fgrad.jit(lambda x, n: lax.while_loop(
            lambda c: c[1] > 0, lambda c: (step(c[0]), c[1] - 1), (x, n))),
        "fori": fgrad.jit(lambda x, n: lax.fori_loop(0, n, lambda i, c: step(c), x)),
        "while": fgrad.jit(lambda x, n: lax.while_loop(
            lambda c: c[0] < n, lambda c: (c[0] + 1, step(c[1])), (0, x))[1]),
        "scan": fgrad.jit(lambda x, n: lax.scan(lambda c, _: (step(c), None), x, None,
                                                length=n)[0], static_argnums=1),
    }


def expected(x, n):
    for _ in range(n):
        x = np.asarray(step(x))
    return x


_SIGINT_SCRIPT = """
import json, os, signal, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
from test_interrupts import loops, expected, LONG, _signal_later
x = np.linspace(0.1, 1.0, 16).astype(np.float32)
out = {}
for name, f in loops().items():
    fast = name == "countdown"      # called with arrays only: natively from the 2nd call on
    if fast:
        n = np.array(3, np.int32)
        f(x, n), f(x, n), f(x, n)
        assert f._fast is not None
        arg = np.array(LONG, np.int32)
    else:
        f.lower(x, LONG).compile()                      # compile now, do not run
        arg = LONG
    start = time.perf_counter()
    sender = _signal_later(0.3, signum=signal.SIGINT)
    try:
        f(x, arg)
        out[name] = ["finished", time.perf_counter() - start]
    except KeyboardInterrupt:
        out[name] = ["interrupted", time.perf_counter() - start]
    sender.wait()
    # still usable: the same function and a new one give the right answers
    got = f(x, np.array(7, np.int32))[0] if fast else f(x, 7)
    ok = np.allclose(got, expected(x, 7), rtol=1e-5)
    out[name].append(bool(ok))
print(json.dumps(out))
"""


def test_ctrl_c_stops_long_native_loops():
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_SIGINT_SCRIPT),
                           os.path.dirname(os.path.abspath(__file__))],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    for name, (how, seconds, usable) in results.items():
        assert how == "interrupted", f"{name}: Ctrl-C did not stop the loop ({seconds:.1f} s)"
        assert seconds < 0.8, f"{name}: KeyboardInterrupt came {seconds:.2f} s after the call " \
                              f"(Ctrl-C at 0.3 s)"
        assert usable, f"{name}: wrong answer after the interrupt"


class _Stop(Exception):
    pass


@pytest.fixture
def usr1():
    """Installs a SIGUSR1 handler (given by the test) and restores the old one."""
    old = signal.getsignal(signal.SIGUSR1)
    yield lambda handler: signal.signal(signal.SIGUSR1, handler)
    signal.signal(signal.SIGUSR1, old)


def _signal_later(seconds, times=1, signum=signal.SIGUSR1, pid=None):
    """Another process sends this one `signum` `times` times, `seconds` apart (a
    Python thread could not: a call the native dispatcher runs holds the GIL)."""
    kill = f"sleep {seconds}; kill -{int(signum)} {pid or os.getpid()}; "
    return subprocess.Popen(["sh", "-c", kill * times])


@pytest.mark.parametrize("kind", ["fori", "while", "scan", "countdown"])
def test_a_raising_handler_stops_the_loop(kind, usr1):
    def stop(signum, frame):
        raise _Stop()
    usr1(stop)
    f = loops()[kind]
    x = np.linspace(0.1, 1.0, 16).astype(np.float32)
    n = LONG
    if kind == "countdown":            # served by the native dispatcher
        n = np.array(LONG, np.int32)
        for _ in range(3):
            f(x, np.array(2, np.int32))
        assert f._fast is not None
    f.lower(x, n).compile()
    sender = _signal_later(0.2)
    start = time.perf_counter()
    with pytest.raises(_Stop):
        f(x, n)
    assert time.perf_counter() - start < 0.7
    sender.wait()
    got = f(x, np.array(5, np.int32))[0] if kind == "countdown" else f(x, 5)
    np.testing.assert_allclose(got, expected(x, 5), rtol=1e-5)


@pytest.mark.parametrize("kind", ["fori", "while", "countdown"])
def test_a_returning_handler_lets_the_loop_finish(kind, usr1):
    """(countdown: served by the native dispatcher, which hands a call with a
    signal to the Python path; that runs the handler, then the call again)"""
    seen = []
    usr1(lambda signum, frame: seen.append(time.perf_counter()))
    f = loops()[kind]
    x = np.linspace(0.1, 1.0, 16).astype(np.float32)
    n = np.array(1_000_000, np.int32)
    f(x, n)                                       # compiled (not timed)
    while True:                                   # at least a second of work
        start = time.perf_counter()
        quiet = f(x, n)
        if time.perf_counter() - start >= 1.0 or n >= 2**30:
            break
        n = np.array(int(n) * 2, np.int32)
    assert (f._fast is not None) == (kind == "countdown")
    sender = _signal_later(0.1, times=3)
    start = time.perf_counter()
    got = f(x, n)
    end = time.perf_counter()
    sender.wait()
    # the handler ran during the loop (not when it returned), and the loop went on
    assert len(seen) == 3
    assert seen[0] - start < 0.4 and end - seen[-1] > 0.1, (start, seen, end)
    for g, q in zip(fgrad.tree.leaves(got), fgrad.tree.leaves(quiet)):
        np.testing.assert_array_equal(g, q)


def test_loops_on_other_threads_are_left_alone(usr1):
    """Only the main thread handles signals: a loop on another thread runs to its
    end while the main thread handles them."""
    seen = []
    usr1(lambda signum, frame: seen.append(signum))
    f = loops()["while"]
    x = np.linspace(0.1, 1.0, 16).astype(np.float32)
    start = time.perf_counter()
    f(x, np.array(1_000_000, np.int32))
    rate = 1_000_000 / max(time.perf_counter() - start, 1e-6)
    n = np.array(int(rate * 0.5), np.int32)
    quiet = f(x, n)
    got = []
    worker = threading.Thread(target=lambda: got.append(f(x, n)))
    sender = _signal_later(0.1, times=2)
    worker.start()
    worker.join()
    sender.wait()
    time.sleep(0.05)
    assert len(seen) == 2
    np.testing.assert_array_equal(got[0], quiet)
