"""Shared file handling for the data-set readers: finding files, reading raw or
gzip bytes, and the error every reader raises for a bad file."""
import gzip
import os
import zlib

__all__ = ["DataFileError", "find_file", "read_bytes"]


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


def read_bytes(path):
    """The file's bytes, decompressed when the name ends in .gz."""
    if not path.endswith(".gz"):
        with open(path, "rb") as f:
            return f.read()
    try:
        with gzip.open(path, "rb") as f:
            return f.read()
    except EOFError as e:
        raise DataFileError(f"{path}: the gzip stream is truncated ({e})") from None
    except (gzip.BadGzipFile, zlib.error) as e:
        raise DataFileError(f"{path}: not a valid gzip file ({e})") from None
