"""cpu.switch_interval: the GIL switch interval is short while background
compiles run and comes back when the last one ends."""
import sys
import threading

import pytest

from fgrad._src.cpu import compiler_lock, switch_interval
from fgrad._src.jit import executable


@pytest.fixture(autouse=True)
def default_interval():
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.005)
    yield
    sys.setswitchinterval(before)


def test_short_while_inside_restored_after_the_last():
    with switch_interval.short():
        assert sys.getswitchinterval() == switch_interval.INTERVAL
        with switch_interval.short():
            assert sys.getswitchinterval() == switch_interval.INTERVAL
        assert sys.getswitchinterval() == switch_interval.INTERVAL
    assert sys.getswitchinterval() == 0.005


def test_a_shorter_interval_is_kept_and_a_change_meanwhile_is_left():
    sys.setswitchinterval(0.0001)
    shorter = sys.getswitchinterval()      # (kept in whole microseconds)
    with switch_interval.short():
        assert sys.getswitchinterval() == shorter
    assert sys.getswitchinterval() == shorter
    sys.setswitchinterval(0.005)
    with switch_interval.short():
        sys.setswitchinterval(0.002)
        changed = sys.getswitchinterval()
    assert sys.getswitchinterval() == changed


def test_the_backend_is_found_while_another_thread_holds_the_compiler_lock():
    """(a background compile holds the lock for tens of milliseconds: the
    compiling thread must not wait for it before planning)"""
    executable._backend()
    held, release = threading.Event(), threading.Event()

    def hold():
        with compiler_lock.lock:
            held.set()
            release.wait(30)
    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(30)
    found = []
    finder = threading.Thread(target=lambda: found.append(executable._backend()))
    finder.start()
    finder.join(5)
    release.set()
    holder.join()
    finder.join()
    assert found and found[0].__name__.endswith("cpu.fused")
