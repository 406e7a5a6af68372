"""MNIST and Fashion-MNIST in the IDX format (raw or gzip).

An IDX file is a 4-byte magic number `00 00 <type> <ndim>`, then `ndim`
big-endian uint32 sizes, then the data in big-endian C order. Every size is
checked against the bytes present: a short or long file is an error, never a
silently smaller data set.
"""
import math
import os

import numpy as np

from ._files import DataFileError, find_file, open_data, read_at_most

__all__ = ["read_idx", "load_mnist", "MNIST_CLASSES", "FASHION_MNIST_CLASSES"]

# deflate emits at least 2 bits per 258-byte match: no stream expands more than 1032:1
_DEFLATE_MAX_RATIO = 1032
_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}

MNIST_CLASSES = tuple(str(d) for d in range(10))
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal",
                         "Shirt", "Sneaker", "Bag", "Ankle boot")

_PREFIX = {"train": "train", "test": "t10k"}
_KINDS = {"mnist": "MNIST", "fashion": "Fashion-MNIST"}


def read_idx(path):
    """The array stored in the IDX file `path` (raw, or gzip if it ends in .gz),
    in native byte order.

    The header is read and checked first; then exactly the data it declares is
    read, plus one byte to detect trailing junk. A gzip file is decompressed as a
    stream and only that far, so a file whose size does not match its header (a
    gzip bomb included) fails without being decompressed completely.
    """
    return _read_idx(path)


def _read_idx(path, expect=None):
    """read_idx; `expect(shape, dtype)` may refuse the header before the data is read."""
    with open_data(path) as f:
        shape, dtype, header = _read_header(path, f)
        if expect is not None:
            expect(shape, dtype)
        expected = header + math.prod(shape) * dtype.itemsize    # exact: Python ints
        _check_declared_size(path, shape, dtype, expected)
        body = read_at_most(f, expected - header + 1)
    if header + len(body) != expected:
        problem = "truncated" if header + len(body) < expected else "has trailing bytes"
        found = f"{header + len(body)}" if problem == "truncated" else "more"
        raise DataFileError(f"{path}: size mismatch ({problem}): the header gives shape "
                            f"{shape} of {_name(dtype)}, i.e. {expected} bytes, but the file "
                            f"has {found}")
    return body.view(dtype).reshape(shape).astype(dtype.newbyteorder("="))


def _read_header(path, f):
    """(shape, big-endian dtype, header size in bytes) from the magic number and sizes."""
    magic = f.read(4)
    if len(magic) < 4:
        raise DataFileError(f"{path}: truncated IDX file: {len(magic)} bytes, shorter "
                            f"than the 4-byte magic number")
    zero, type_code, ndim = int.from_bytes(magic[:2], "big"), magic[2], magic[3]
    if zero != 0 or type_code not in _IDX_TYPES:
        raise DataFileError(f"{path}: wrong magic number 0x{magic.hex()}: an IDX file "
                            f"starts with 00 00 <type in 08 09 0B 0C 0D 0E> <ndim>")
    sizes = f.read(4 * ndim)
    header = 4 + 4 * ndim
    if len(sizes) < 4 * ndim:
        raise DataFileError(f"{path}: truncated IDX header: {ndim} dimensions need "
                            f"{header} bytes, the file has {4 + len(sizes)}")
    shape = tuple(int.from_bytes(sizes[i:i + 4], "big") for i in range(0, 4 * ndim, 4))
    return shape, np.dtype(_IDX_TYPES[type_code]), header


def _name(dtype):
    return dtype.newbyteorder("=").name


def _check_declared_size(path, shape, dtype, expected):
    """Refuse, before reading the data, a size the file cannot hold: more than a raw
    file's size, or than any gzip stream of its size decompresses to (the shape's
    product is exact, however large, so no overflow passes for a small size)."""
    stored = os.path.getsize(path)
    gz = path.endswith(".gz")
    limit = stored * _DEFLATE_MAX_RATIO if gz else stored
    if expected > limit:
        holds = (f"a {stored}-byte gzip file decompresses to at most {limit} bytes" if gz
                 else f"the file has {stored}")
        raise DataFileError(f"{path}: size mismatch (truncated): the header gives shape "
                            f"{shape} of {_name(dtype)}, i.e. {expected} bytes, but {holds}; "
                            f"the header is corrupt or the file truncated")


def _read_checked(path, type_code, ndim, what):
    """read_idx, refusing a file of another type or rank before reading its data."""
    want = np.dtype(_IDX_TYPES[type_code])

    def expect(shape, dtype):
        if len(shape) != ndim or dtype != want:
            raise DataFileError(f"{path}: wrong magic number for {what}: expected "
                                f"0x{type_code:02x} with {ndim} dimension(s) ({_name(want)}), "
                                f"got {_name(dtype)} with shape {shape}")

    return _read_idx(path, expect)


def load_mnist(directory, split="train", kind="mnist"):
    """(images, labels) of MNIST or Fashion-MNIST from `directory`.

    Reads `train-images-idx3-ubyte` / `train-labels-idx1-ubyte` (split='train')
    or the `t10k-` pair (split='test'), each raw or with a .gz suffix — the names
    both data sets use. kind ('mnist' or 'fashion') only names the data set in
    messages; the class names are MNIST_CLASSES / FASHION_MNIST_CLASSES.
    Returns images as uint8 (N, 1, rows, cols) (NCHW, one channel) and labels as
    int64 (N,).
    """
    if split not in _PREFIX:
        raise ValueError(f"load_mnist: split must be 'train' or 'test', got {split!r}")
    if kind not in _KINDS:
        raise ValueError(f"load_mnist: kind must be 'mnist' or 'fashion', got {kind!r}")
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"load_mnist: directory {os.path.abspath(directory)!r} does "
                                f"not exist; download the {_KINDS[kind]} IDX files into it")
    what = f"{_KINDS[kind]} {split}"
    stem = _PREFIX[split]
    names = {part: [f"{stem}-{part}-idx{n}-ubyte", f"{stem}-{part}-idx{n}-ubyte.gz"]
             for part, n in (("images", 3), ("labels", 1))}
    images_path = find_file(directory, names["images"], f"{what} images")
    labels_path = find_file(directory, names["labels"], f"{what} labels")
    images = _read_checked(images_path, 0x08, 3, "images (uint8, 3-d)")
    labels = _read_checked(labels_path, 0x08, 1, "labels (uint8, 1-d)")
    if len(images) != len(labels):
        raise DataFileError(f"{what}: size mismatch: {images_path} holds {len(images)} images "
                            f"but {labels_path} holds {len(labels)} labels")
    if labels.size and labels.max() > 9:
        raise DataFileError(f"{labels_path}: labels must lie in 0..9, found {labels.max()}")
    return images[:, None, :, :], labels.astype(np.int64)
