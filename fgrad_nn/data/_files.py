"""Shared file handling for the data-set readers: finding files, reading raw or
gzip bytes (all of them, or a bounded stream), and the error every reader raises
for a bad file."""
import contextlib
import gzip
import os
import zlib

import numpy as np

__all__ = ["DataFileError", "find_file", "read_bytes", "open_data", "read_at_most"]

_CHUNK = 1 << 22


class DataFileError(ValueError):
    """A data file is truncated, corrupt or not in the expected format."""


def find_file(directory, names, what):
    """The first of `names` present in `directory`; FileNotFoundError naming them all."""
    for name in names:
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"{what}: expected {' or '.join(repr(n) for n in names)} in "
                            f"{os.path.abspath(directory)!r}, found none of them")


@contextlib.contextmanager
def open_data(path):
    """A binary stream of the file's bytes, decompressed on the fly when the name
    ends in .gz; a damaged gzip stream raises DataFileError naming the file."""
    if not path.endswith(".gz"):
        with open(path, "rb") as f:
            yield f
        return
    try:
        with gzip.open(path, "rb") as f:
            yield f
    except EOFError as e:
        raise DataFileError(f"{path}: the gzip stream is truncated ({e})") from None
    except (gzip.BadGzipFile, zlib.error) as e:
        raise DataFileError(f"{path}: not a valid gzip file ({e})") from None


def read_at_most(stream, size):
    """Up to `size` bytes from `stream` as a uint8 array, read in chunks into one
    buffer: memory grows with the bytes actually there, not with `size`."""
    chunks, total = [], 0
    while total < size:
        chunk = stream.read(min(_CHUNK, size - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return np.frombuffer(b"".join(chunks), np.uint8)


def read_bytes(path):
    """The file's bytes, decompressed when the name ends in .gz."""
    with open_data(path) as f:
        return f.read()
