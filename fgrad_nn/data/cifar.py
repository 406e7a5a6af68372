"""CIFAR-10 in its binary version (`cifar-10-batches-bin/`).

Each batch file is a sequence of 3073-byte records: one label byte (0-9), then
1024 red, 1024 green and 1024 blue bytes of a 32x32 image in row-major order.
A file whose size is not a whole number of records, or an empty one, is an
error naming the file.
"""
import os

import numpy as np

from ._files import DataFileError, read_bytes

__all__ = ["load_cifar10", "CIFAR10_CLASSES"]

CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                   "ship", "truck")

_RECORD = 1 + 3 * 32 * 32
_FILES = {"train": [f"data_batch_{i}.bin" for i in range(1, 6)], "test": ["test_batch.bin"]}
_CHILD = "cifar-10-batches-bin"


def _batch_directory(directory):
    child = os.path.join(directory, _CHILD)
    return child if os.path.isdir(child) else directory


def _read_batch(path):
    data = read_bytes(path)
    if not data or len(data) % _RECORD:
        raise DataFileError(f"{path}: size mismatch: {len(data)} bytes is not a whole, "
                            f"non-zero number of {_RECORD}-byte CIFAR-10 records (label + "
                            f"3x32x32 pixels); the file is truncated or not a CIFAR-10 batch")
    records = np.frombuffer(data, np.uint8).reshape(-1, _RECORD)
    labels = records[:, 0].astype(np.int64)
    if labels.max() > 9:
        bad = int(np.argmax(labels > 9))
        raise DataFileError(f"{path}: record {bad} has label {labels[bad]}, outside 0..9; "
                            f"the file is corrupt or not a CIFAR-10 batch")
    return records[:, 1:].reshape(-1, 3, 32, 32), labels


def load_cifar10(directory, split="train"):
    """(images, labels) of CIFAR-10 from the binary batches in `directory` (or in its
    `cifar-10-batches-bin` child): data_batch_1..5.bin for split='train',
    test_batch.bin for split='test'. Images are uint8 (N, 3, 32, 32) (NCHW, RGB),
    labels int64 (N,); class names are CIFAR10_CLASSES.
    """
    if split not in _FILES:
        raise ValueError(f"load_cifar10: split must be 'train' or 'test', got {split!r}")
    folder = _batch_directory(directory)
    paths = [os.path.join(folder, name) for name in _FILES[split]]
    missing = [os.path.basename(p) for p in paths if not os.path.isfile(p)]
    if missing:
        raise FileNotFoundError(f"load_cifar10: missing {', '.join(missing)} in "
                                f"{os.path.abspath(folder)!r} (the CIFAR-10 binary version, "
                                f"cifar-10-batches-bin)")
    parts = [_read_batch(p) for p in paths]
    return (np.concatenate([images for images, _ in parts]),
            np.concatenate([labels for _, labels in parts]))
