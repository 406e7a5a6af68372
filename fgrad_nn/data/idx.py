"""MNIST and Fashion-MNIST in the IDX format (raw or gzip).

An IDX file is a 4-byte magic number `00 00 <type> <ndim>`, then `ndim`
big-endian uint32 sizes, then the data in big-endian C order. Every size is
checked against the bytes present: a short or long file is an error, never a
silently smaller data set.
"""
import os

import numpy as np

from ._files import DataFileError, find_file, read_bytes

__all__ = ["read_idx", "load_mnist", "MNIST_CLASSES", "FASHION_MNIST_CLASSES"]

_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}

MNIST_CLASSES = tuple(str(d) for d in range(10))
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal",
                         "Shirt", "Sneaker", "Bag", "Ankle boot")

_PREFIX = {"train": "train", "test": "t10k"}
_KINDS = {"mnist": "MNIST", "fashion": "Fashion-MNIST"}


def read_idx(path):
    """The array stored in the IDX file `path` (raw, or gzip if it ends in .gz),
    in native byte order."""
    data = read_bytes(path)
    if len(data) < 4:
        raise DataFileError(f"{path}: truncated IDX file: {len(data)} bytes, shorter than "
                            f"the 4-byte magic number")
    zero, type_code, ndim = int.from_bytes(data[:2], "big"), data[2], data[3]
    if zero != 0 or type_code not in _IDX_TYPES:
        raise DataFileError(f"{path}: wrong magic number 0x{data[:4].hex()}: an IDX file "
                            f"starts with 00 00 <type in 08 09 0B 0C 0D 0E> <ndim>")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise DataFileError(f"{path}: truncated IDX header: {ndim} dimensions need "
                            f"{header} bytes, the file has {len(data)}")
    shape = tuple(int(s) for s in np.frombuffer(data, ">u4", ndim, 4))
    dtype = np.dtype(_IDX_TYPES[type_code])
    expected = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) != expected:
        problem = "truncated" if len(data) < expected else "has trailing bytes"
        raise DataFileError(f"{path}: size mismatch ({problem}): the header gives shape "
                            f"{shape} of {dtype.newbyteorder('=').name}, i.e. {expected} bytes, "
                            f"but the file has {len(data)}")
    array = np.frombuffer(data, dtype, offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="))


def _read_checked(path, type_code, ndim, what):
    array = read_idx(path)
    expected = np.dtype(_IDX_TYPES[type_code]).newbyteorder("=")
    if array.ndim != ndim or array.dtype != expected:
        raise DataFileError(f"{path}: wrong magic number for {what}: expected "
                            f"0x{type_code:02x} with {ndim} dimension(s) ({expected.name}), got "
                            f"{array.dtype.name} with shape {array.shape}")
    return array


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
