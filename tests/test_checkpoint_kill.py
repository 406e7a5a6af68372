"""kill -9 during checkpoint saves: the file is always the old or the new complete
checkpoint, and the next save removes the temporaries of dead writers (never those
of a live one). The quick variant runs in `make test`; the long one is marked slow."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import fgrad_nn
from fgrad_nn import checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(fgrad_nn.__file__)))

# Saves {"w": 8 MB all equal to i, "i": i} with metadata {"i": i} for i = start, start+1,
# ... (forever with "loop", once with "once"); "loop" prints "writing" as each file's
# bytes start to go out, so that kills can aim at the write. With "stuck" it writes
# half of the file and then waits, a writer caught mid-save.
WRITER = r"""
import sys, time
import numpy as np
from fgrad_nn import checkpoint
mode, path, start = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "loop":
    def write_announced(file, data, write=checkpoint._write):
        print("writing", flush=True)
        write(file, data)
    checkpoint._write = write_announced
if mode == "stuck":
    def write_half_and_wait(file, data):
        file.write(bytes(data[:len(data) // 2]))
        file.flush()
        print("writing", flush=True)
        time.sleep(600)
    checkpoint._write = write_half_and_wait
w = np.empty(1 << 20, np.float64)
print("ready", flush=True)
i = start
while True:
    w.fill(i)
    checkpoint.save(path, {"w": w, "i": np.int64(i)}, metadata={"i": i})
    if mode == "once":
        break
    i += 1
"""


def start_writer(mode, path, start=0):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    proc = subprocess.Popen([sys.executable, "-c", WRITER, mode, str(path), str(start)],
                            stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def kill(proc):
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()


def temporaries(directory):
    return sorted(n for n in os.listdir(directory) if n.endswith(".tmp"))


def saved_step(path):
    """The step of the complete checkpoint at `path` (None if there is none yet);
    fails unless the file loads and is self-consistent."""
    if not os.path.exists(path):
        return None
    tree = checkpoint.load(path)
    i = int(tree["i"])
    assert checkpoint.load_metadata(path) == {"i": i}
    assert tree["w"].shape == (1 << 20,) and np.all(tree["w"] == i)
    return i


def kill_during_saves(tmp_path, kills, seed):
    """SIGKILL a saving process `kills` times, each at a random moment around the
    write of one of its first saves (each writer's first save removes the debris of
    the last); returns how many kills left a temporary behind."""
    path = tmp_path / "x.safetensors"
    rng = np.random.default_rng(seed)
    last, debris = -1, 0
    for k in range(kills):
        proc = start_writer("loop", path, start=k * 1_000_000)
        for _ in range(rng.integers(1, 4)):
            assert proc.stdout.readline().strip() == "writing"
        time.sleep(rng.uniform(0.0, 0.02))
        kill(proc)
        step = saved_step(path)         # the old file or a newer complete one
        assert step is None or step >= last
        last = last if step is None else step
        debris += len(temporaries(tmp_path)) > 0
    finish = start_writer("once", path, start=10**9)   # a fresh process saves
    assert finish.wait(timeout=60) == 0
    finish.stdout.close()
    assert saved_step(path) == 10**9
    assert temporaries(tmp_path) == []
    return debris


def test_kill_during_saves_quick(tmp_path):
    kill_during_saves(tmp_path, kills=3, seed=0)


@pytest.mark.slow
def test_kill_during_saves_long(tmp_path):
    assert kill_during_saves(tmp_path, kills=30, seed=1) > 0   # the cleanup had work


def test_dead_writers_temporary_is_removed_live_ones_kept(tmp_path):
    path = tmp_path / "x.safetensors"
    checkpoint.save(path, {"w": np.zeros(2)})
    live, dead = (start_writer("stuck", path, start=s) for s in (1, 2))
    try:
        for proc in (live, dead):
            assert proc.stdout.readline().strip() == "writing"
        live_temp = f".x.safetensors.{live.pid}."
        assert len(temporaries(tmp_path)) == 2
        kill(dead)
        checkpoint.save(path, {"w": np.ones(2)})
        left = temporaries(tmp_path)
        assert len(left) == 1 and left[0].startswith(live_temp)   # the live writer's
        assert np.array_equal(checkpoint.load(path)["w"], np.ones(2))
    finally:
        for proc in (live, dead):
            if proc.returncode is None:
                kill(proc)
    checkpoint.save(path, {"w": np.ones(2)})
    assert temporaries(tmp_path) == []


def dead_pid():
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_locked_temporary_of_unknown_pid_is_kept(tmp_path):
    """A writer in another pid namespace (a container sharing the directory) has a
    pid that is not running here: its lock alone keeps its temporary."""
    import fcntl
    temp = tmp_path / f".x.{dead_pid()}.abcdefgh.tmp"
    temp.write_bytes(b"partial")
    with open(temp, "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        checkpoint.save(tmp_path / "x", {"w": np.ones(2)})
        assert temp.exists()
    checkpoint.save(tmp_path / "x", {"w": np.ones(2)})
    assert not temp.exists()


def test_other_targets_and_foreign_names_are_left_alone(tmp_path):
    pid = dead_pid()
    others = [f".x.5.{pid}.abcdefgh.tmp",   # a temporary of x.5
              f".x.{pid}.abc.def.tmp", ".x.notapid.abcdefgh.tmp", "x.tmp"]
    for name in others:
        (tmp_path / name).write_bytes(b"")
    checkpoint.save(tmp_path / "x", {"w": np.ones(2)})
    assert temporaries(tmp_path) == sorted(others)
