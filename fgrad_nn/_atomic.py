"""Writing a file atomically, for checkpoints, histories and plots.

The bytes go to a temporary file beside the target, which is flushed to disk
and renamed over it: a crash, even kill -9, leaves the old file or the new one,
never a mix.

- Modes: a file that exists keeps its permission bits (a `chmod 600` survives
  the next save); a new file gets 0666 & ~umask, as `open(path, "w")` gives.
- Symlinks are followed, as editors do: the file the link points to is
  replaced and the link stays a link (a dangling link gets its target created).
- Debris: a temporary is named `.<name>.<pid>.<random>.tmp` and held under an
  exclusive flock while it is written. Each write first removes the temporaries
  of the same target left by writers that died (kill -9, power cut): the pid is
  not a running process and the lock is free. A live writer's temporary is never
  touched: its pid runs, or (a writer in another pid namespace) it holds the lock.
"""
import os
import re
import stat
import tempfile

try:
    import fcntl
except ImportError:   # Windows: no flock; stale temporaries are left alone there
    fcntl = None

__all__ = ["write_atomically", "remove_stale_temporaries"]


def write_atomically(path, write):
    """Call `write(file)` on a binary file whose contents then replace `path` at once.

    Returns the path of the file written (the link's target when `path` is a symlink).
    """
    target = os.path.realpath(os.fspath(path))
    directory, name = os.path.split(target)
    remove_stale_temporaries(directory, name)
    mode = _mode_for(target)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.{os.getpid()}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            _lock(file)
            write(file)
            file.flush()
            os.fsync(file.fileno())
            os.chmod(tmp, mode)
            os.replace(tmp, target)   # still locked: no cleaner can take it for debris
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_directory(directory)
    return target


def _lock(file):
    """Hold an exclusive flock on our temporary while it is written, where the file
    system has locks (without them, cleaners go by the pid alone)."""
    if fcntl is None:
        return
    try:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        pass


def _mode_for(target):
    """The existing file's permission bits, or those a new file would get."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode) & 0o777
    except FileNotFoundError:
        return 0o666 & ~_umask()


def _umask():
    """The process's umask, read without changing it where the OS allows (setting it
    to read it would race with other threads creating files)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_directory(directory):
    """Make the rename durable (not possible on every platform)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# -- debris of dead writers -------------------------------------------------------------

def remove_stale_temporaries(directory, name):
    """Delete the temporaries of `directory/name` whose writers are gone; returns
    how many. Failures are ignored: cleaning up must never fail a save."""
    if fcntl is None:
        return 0
    pattern = re.compile(re.escape(f".{name}.") + r"(\d+)\.[a-z0-9_]+\.tmp")
    removed = 0
    try:
        with os.scandir(directory) as entries:
            candidates = [(e.path, int(m.group(1))) for e in entries
                          if (m := pattern.fullmatch(e.name))]
    except OSError:
        return 0
    for path, pid in candidates:
        if not _pid_running(pid):
            removed += _remove_if_unlocked(path)
    return removed


def _pid_running(pid):
    """Whether process `pid` runs (a zombie has exited: its locks are released)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, OSError):
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def _remove_if_unlocked(path):
    """Unlink `path` if it is our own regular file and no process holds its lock."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return 0
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            return 0
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.unlink(path)
        return 1
    except OSError:   # locked by a live writer, or already removed by another cleaner
        return 0
    finally:
        os.close(fd)
