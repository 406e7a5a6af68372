"""The offline default data set: scikit-learn's bundled handwritten digits
(1797 real 8x8 images of the digits 0-9, pixel values 0-16; UCI ML data set)."""
import numpy as np

from .._extras import require
from .dataset import train_test_split

__all__ = ["load_digits", "load_digits_split"]


def load_digits():
    """(images, labels): float32 (1797, 1, 8, 8) scaled to [0, 1] (NCHW, one
    channel), int64 labels (1797,) in 0..9."""
    datasets = require("sklearn.datasets", "load_digits (scikit-learn ships the data set)",
                       "examples", package="scikit-learn")
    bunch = datasets.load_digits()
    images = (bunch.images.astype(np.float32) / np.float32(16.0))[:, None, :, :]
    return images, bunch.target.astype(np.int64)


def load_digits_split(test_size=0.2, seed=0):
    """The digits split into a fixed, stratified train and test part:
    `x_train, x_test, y_train, y_test` (each class keeps its share of the test set).
    The same (test_size, seed) always gives the same split."""
    images, labels = load_digits()
    return train_test_split(images, labels, test_size=test_size, seed=seed, stratify=labels)
