"""Scratch directories of a compile (linking a library, loading one) and the
removal of those a killed process left behind.

Each is `fgrad-<use>-<pid>-<random>` in the system's temporary directory and
lives for the link or the dlopen only; one still there a minute later whose
process is gone was left by a process killed on the spot (kill -9), and the
first compile of a later process removes it (`remove_stale`). The disk cache
names its temporary files the same way (`.tmp-<pid>-<random>`).
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import time

__all__ = ["directory", "make", "remove_stale", "is_stale"]

PREFIX = "fgrad-"
USES = ("link", "lib")
STALE_AFTER_S = 60            # a scratch directory lives for a link or a dlopen
UNNAMED_STALE_AFTER_S = 3600  # those of fgrad versions that did not name their pid

_PID = re.compile(r"(\d+)-")


def make(use: str) -> str:
    """A new scratch directory (0700) for `use` ('link' or 'lib'); the caller removes it."""
    return tempfile.mkdtemp(prefix=f"{PREFIX}{use}-{os.getpid()}-")


@contextlib.contextmanager
def directory(use: str):
    """A scratch directory for `use`, removed on exit."""
    path = make(use)
    try:
        yield path
    finally:
        shutil.rmtree(path, True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:             # another user's process (EPERM): it exists
        return True
    return True


def is_stale(rest: str, st, now: float) -> bool:
    """Whether a scratch entry whose name continues with `rest` (`<pid>-<random>`)
    and has stat `st` was left by a process that is gone: its process is not
    running and it is over a minute old (an hour when it names no process)."""
    age = now - st.st_mtime
    m = _PID.match(rest)
    if m is None:
        return age > UNNAMED_STALE_AFTER_S
    return age > STALE_AFTER_S and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1)))


_swept = False


def remove_stale(once: bool = True) -> None:
    """Remove this user's scratch directories left by processes that are gone
    (once per process unless `once` is False)."""
    global _swept
    if once and _swept:
        return
    _swept = True
    me = os.geteuid() if hasattr(os, "geteuid") else None
    now = time.time()
    try:
        entries = os.scandir(tempfile.gettempdir())
    except OSError:
        return
    with entries:
        for entry in entries:
            name = entry.name
            if not name.startswith(PREFIX):
                continue
            use, _, rest = name[len(PREFIX):].partition("-")
            if use not in USES:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if (entry.is_dir(follow_symlinks=False) and (me is None or st.st_uid == me)
                    and is_stale(rest, st, now)):
                shutil.rmtree(entry.path, True)
