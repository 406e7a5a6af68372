"""The CPU backend's disk cache: compiled code kept between processes.

Files live in `<root>/cpu/` (root: `cache_dir` when given, else
$FGRAD_CACHE_DIR, else ~/.cache/fgrad): `<key>.so` or `<key>.o` (compiled
code) and `<key>.alias` (JSON naming a code file), each a header (magic,
sha256 and length of the payload) and the payload. The header only catches
damage: whoever can write the directory can write a valid header too.

Code from the cache runs in this process, so the cache is used only when
nobody else can write it (as OpenSSH and pip do): directories are made 0700
and files 0600; a root or cpu/ directory owned by another user (root is
accepted) or writable by group or others is refused with one warning, and
compiles then go without the disk cache. Files are opened with O_NOFOLLOW
relative to the checked directory and checked again on their descriptor
(owner, mode, a regular file), so a symbolic link or a file swapped in after
the check is never read.

Size: the files are kept under `config.disk_cache_max_bytes`
(FGRAD_CACHE_MAX_BYTES, default 1 GiB) by removing the least recently used
(a hit sets a file's modification time). A process counts what it writes
and lists the directory only at its first write and then after writing an
eighth of the limit, or when its count passes the limit, so several
processes writing at once may overshoot it for a while.

`info()` and `clear()` are public as fgrad.disk_cache_info and
fgrad.clear_disk_cache.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import secrets
import stat
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..config import config
from . import scratch

__all__ = ["root", "read", "write", "exists", "info", "clear", "DiskCacheInfo"]

_MAGIC = b"FGRADOBJ\x01"
_HEADER_LEN = len(_MAGIC) + 32 + 8      # magic, sha256(payload), length

# The names this module writes (anything else in the directory is left alone);
# host-*.json: LLVM's view of the CPU, written by fgrad before it detected that
# afresh in each process (removed like the rest).
_NAME = re.compile(r"[0-9a-f]{64}\.(so|o|alias)\Z")
_OLD_NAME = re.compile(r"host-[0-9a-f]{32}\.json\Z")
_TEMPORARY = ".tmp-"

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = (os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
               | getattr(os, "O_NONBLOCK", 0))            # a planted FIFO must not block
_WRITE_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                | getattr(os, "O_CLOEXEC", 0))

RESCAN_FRACTION = 8       # list the directory again after writing limit / 8 bytes
EVICT_TO = 0.8            # eviction removes files until this fraction of the limit


class Unusable(Exception):
    """The cache directory is not trusted or cannot be used (the message says why)."""


def root(cache_dir: Path | str | None = None) -> Path:
    """`cache_dir`, else $FGRAD_CACHE_DIR, else ~/.cache/fgrad."""
    if cache_dir is not None:
        return Path(cache_dir)
    env = os.environ.get("FGRAD_CACHE_DIR")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "fgrad"


def _distrust(st, what: str, path: str) -> str | None:
    """Why a directory or file with stat `st` must not be trusted, or None."""
    if not hasattr(os, "geteuid"):
        return None
    me = os.geteuid()
    if st.st_uid != me and st.st_uid != 0:
        return f"{what} {path} is owned by uid {st.st_uid}, not by this user (uid {me})"
    if st.st_mode & 0o022:
        who = " and ".join(w for w, bit in (("group", 0o020), ("others", 0o002))
                           if st.st_mode & bit)
        return (f"{what} {path} is writable by {who} (mode {stat.S_IMODE(st.st_mode):03o}); "
                f"`chmod go-w {path}` makes it private")
    return None


_warned: set[tuple[str, str]] = set()


def _warn_once(path: str, reason: str, file: bool = False) -> None:
    """Say once per process why a cache directory (or `file`) is not used."""
    if (path, reason) in _warned:
        return
    _warned.add((path, reason))
    if file:
        message = (f"fgrad does not load the disk cache's file {path}: {reason}; it compiles "
                   f"the code again and replaces the file")
    else:
        message = (f"fgrad does not use the disk cache at {path}: {reason}; compiled code is "
                   f"not cached (set FGRAD_CACHE_DIR to a directory of your own)")
    warnings.warn(message, RuntimeWarning, stacklevel=4)


def _open_dir(name, shown, dir_fd=None, create=True, follow=True) -> int:
    """An fd of directory `name` (`shown` in messages; made 0700 when missing and
    `create`), after checking who may write it. Raises Unusable, or
    FileNotFoundError when it is missing and not `create`."""
    flags = _DIR_FLAGS | (0 if follow else os.O_NOFOLLOW)
    try:
        try:
            fd = os.open(name, flags, dir_fd=dir_fd)
        except FileNotFoundError:
            if not create:
                raise
            if dir_fd is None:
                os.makedirs(name, mode=0o700, exist_ok=True)
            else:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o700, dir_fd=dir_fd)
            fd = os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        if create:
            raise Unusable(f"cannot make directory {shown}") from None
        raise
    except OSError as e:
        why = "it is a symbolic link" if e.errno == errno.ELOOP else e.strerror or str(e)
        raise Unusable(f"cannot open directory {shown}: {why}") from None
    reason = _distrust(os.fstat(fd), "directory", shown)
    if reason is not None:
        os.close(fd)
        raise Unusable(reason)
    return fd


@contextlib.contextmanager
def _cpu_dir(cache_dir, create=True):
    """(path, fd) of `<root>/cpu`, checked (and made when missing and `create`);
    raises Unusable (and warns once per directory and reason) when it cannot be
    trusted or used, FileNotFoundError when missing and not `create`."""
    base = os.fspath(root(cache_dir))
    path = os.path.join(base, "cpu")
    try:
        root_fd = _open_dir(base, base, create=create)
        try:
            fd = _open_dir("cpu", path, dir_fd=root_fd, create=create, follow=False)
        finally:
            os.close(root_fd)
    except Unusable as e:
        _warn_once(base, str(e))
        raise
    try:
        yield path, fd
    finally:
        os.close(fd)


def read(name: str, cache_dir=None) -> tuple[bytes | None, str | None]:
    """(payload, None) of cache file `name`, or (None, why it is not used);
    (None, None) when there is none. A hit marks the file recently used."""
    if not _NAME.match(name):
        return None, f"not a cache file name: {name!r}"
    try:
        with _cpu_dir(cache_dir, create=False) as (path, dfd):
            try:
                fd = os.open(name, _READ_FLAGS, dir_fd=dfd)
            except FileNotFoundError:
                return None, None
            except OSError as e:
                if e.errno != errno.ELOOP:
                    raise
                reason = f"cache file {os.path.join(path, name)} is a symbolic link"
                _warn_once(os.path.join(path, name), reason, file=True)
                return None, reason
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    reason = f"cache file {os.path.join(path, name)} is not a regular file"
                else:
                    reason = _distrust(st, "cache file", os.path.join(path, name))
                if reason is not None:
                    _warn_once(os.path.join(path, name), reason, file=True)
                    return None, reason
                with open(fd, "rb", closefd=False) as f:
                    data = f.read()
                payload, err = _unpack(data)
                if payload is not None:
                    with contextlib.suppress(OSError):
                        os.utime(fd)          # recently used (mtime orders eviction)
                return payload, err
            finally:
                os.close(fd)
    except FileNotFoundError:
        return None, None
    except Unusable as e:
        return None, str(e)
    except OSError as e:
        return None, f"unreadable cache file: {e}"


def _unpack(data: bytes):
    if len(data) < _HEADER_LEN or not data.startswith(_MAGIC):
        return None, "corrupt cache file (bad header)"
    off = len(_MAGIC)
    digest = data[off:off + 32]
    length = int.from_bytes(data[off + 32:off + 40], "little")
    payload = data[_HEADER_LEN:]
    if len(payload) != length or hashlib.sha256(payload).digest() != digest:
        return None, "corrupt cache file (bad checksum)"
    return payload, None


def write(name: str, payload: bytes, cache_dir=None) -> str | None:
    """Write cache file `name` (0600, atomically: through a temporary file named
    with this process's id, then renamed); returns why it was not written, or
    None. Evicts least recently used files when the cache is over its limit."""
    if not _NAME.match(name):
        return f"not a cache file name: {name!r}"
    blob = _MAGIC + hashlib.sha256(payload).digest() + len(payload).to_bytes(8, "little") + payload
    limit = max_bytes()
    if len(blob) > limit:
        return f"{len(blob)} bytes is more than the disk cache's limit ({limit} bytes)"
    try:
        with _cpu_dir(cache_dir) as (path, dfd):
            tmp = f"{_TEMPORARY}{os.getpid()}-{secrets.token_hex(6)}"
            fd = os.open(tmp, _WRITE_FLAGS, 0o600, dir_fd=dfd)
            try:
                with open(fd, "wb", closefd=False) as f:
                    f.write(blob)
                os.close(fd)
                fd = -1
                os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                if fd >= 0:
                    os.close(fd)
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=dfd)
                raise
            _account(path, dfd, len(blob), limit)
    except Unusable as e:
        return str(e)
    except OSError as e:
        return f"could not write cache file: {e}"
    return None


def exists(name: str, cache_dir=None) -> bool:
    """Whether cache file `name` is there (False when the cache cannot be used)."""
    try:
        with _cpu_dir(cache_dir, create=False) as (_, dfd):
            os.stat(name, dir_fd=dfd, follow_symlinks=False)
            return True
    except (OSError, Unusable):
        return False


# --------------------------------------------------------------------------
# Size and eviction

def max_bytes() -> int:
    """config.disk_cache_max_bytes, checked."""
    value = config.disk_cache_max_bytes
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"config.disk_cache_max_bytes must be a whole number of bytes >= 0 "
                         f"(0 turns the disk cache off), not {value!r}; e.g. "
                         f"fgrad.config.update('disk_cache_max_bytes', 2 << 30)")
    return value


# per cpu/ directory: [bytes counted, bytes written since the directory was listed]
_usage: dict[str, list[int]] = {}


def _account(path: str, dfd: int, written: int, limit: int) -> None:
    usage = _usage.get(path)
    if usage is None:          # first write of this process: list it (and tidy up)
        usage = _usage[path] = [_evict(dfd, limit), 0]
        return
    usage[0] += written
    usage[1] += written
    if usage[0] > limit or usage[1] > limit // RESCAN_FRACTION:
        usage[:] = [_evict(dfd, limit), 0]


def _evict(dfd: int, limit: int) -> int:
    """List the directory: remove temporaries of writers that died, then the least
    recently used files while over `limit` (down to EVICT_TO of it); returns
    the bytes left."""
    files = _listing(dfd, remove_stale=True)
    total = sum(size for _, size, _ in files)
    if total > limit:
        for _, size, name in sorted(files):
            if total <= limit * EVICT_TO:
                break
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=dfd)
            total -= size
    return total


def _listing(dfd: int, remove_stale: bool) -> list[tuple[float, int, str]]:
    """(mtime, size, name) of the cache's files; temporaries left by a writer that
    died (`scratch.is_stale`) are removed when `remove_stale`, others skipped."""
    files = []
    now = time.time()
    with os.scandir(dfd) as entries:
        for entry in entries:
            name = entry.name
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            if name.startswith(_TEMPORARY):
                if remove_stale and scratch.is_stale(name[len(_TEMPORARY):], st, now):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(name, dir_fd=dfd)
                continue
            if _NAME.match(name) or _OLD_NAME.match(name):
                files.append((st.st_mtime, st.st_size, name))
    return files


# --------------------------------------------------------------------------
# Public: see the size, clear

@dataclass(frozen=True)
class DiskCacheInfo:
    """What `fgrad.disk_cache_info()` reports."""
    path: str                 # the directory compiled code is kept in
    files: int
    bytes: int
    max_bytes: int            # config.disk_cache_max_bytes (FGRAD_CACHE_MAX_BYTES)
    problem: str | None       # why the cache is not used, or None


def info(cache_dir: Path | str | None = None) -> DiskCacheInfo:
    """The disk cache's directory, number of files and bytes, and limit."""
    path = os.path.join(root(cache_dir), "cpu")
    try:
        with _cpu_dir(cache_dir, create=False) as (path, dfd):
            files = _listing(dfd, remove_stale=False)
    except FileNotFoundError:
        files = []
    except (Unusable, OSError) as e:
        return DiskCacheInfo(path, 0, 0, max_bytes(), str(e))
    return DiskCacheInfo(path, len(files), sum(size for _, size, _ in files), max_bytes(), None)


def clear(cache_dir: Path | str | None = None) -> int:
    """Remove the compiled code in the disk cache (only the files fgrad writes
    there); returns the bytes freed. Code already loaded keeps working."""
    try:
        with _cpu_dir(cache_dir, create=False) as (path, dfd):
            files = _listing(dfd, remove_stale=True)
            freed = 0
            for _, size, name in files:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=dfd)
                    freed += size
            _usage.pop(path, None)
            return freed
    except FileNotFoundError:
        return 0
    except Unusable as e:
        raise PermissionError(f"fgrad.clear_disk_cache: {e}; nothing was removed") from None
    except OSError as e:
        raise OSError(e.errno, f"fgrad.clear_disk_cache: cannot list or remove the files "
                               f"in {root(cache_dir) / 'cpu'}: {e.strerror or e}") from None
