"""Datasets: the `Dataset` protocol, in-memory `ArrayDataset`, `Subset`, and
seeded splits (`random_split`, `train_test_split`).

A dataset has a length and returns one sample per integer index: a tuple of
arrays (e.g. `(image, label)`) or a single array. `DataLoader` stacks samples
into batches; a dataset that also has `gather(indices)` (ArrayDataset, Subset of
one) returns a whole batch at once, by indexing its arrays with the batch's
indices instead of looping over samples in Python.
"""
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["Dataset", "ArrayDataset", "Subset", "random_split", "train_test_split", "gather"]


@runtime_checkable
class Dataset(Protocol):
    """Anything with `len(ds)` and `ds[i]` -> a sample (tuple of arrays, or an array)."""

    def __len__(self) -> int: ...

    def __getitem__(self, index): ...


class ArrayDataset:
    """Samples are the rows of equally long arrays: `ds[i] == (a[i], b[i], ...)`.

        ds = ArrayDataset(images, labels)      # ds[3] -> (images[3], labels[3])
    """

    def __init__(self, *arrays):
        if not arrays:
            raise ValueError("ArrayDataset: pass at least one array, e.g. ArrayDataset(x, y)")
        arrays = tuple(np.asarray(a) for a in arrays)
        for i, a in enumerate(arrays):
            if a.ndim == 0:
                raise ValueError(f"ArrayDataset: array {i} is 0-d (shape ()); every array "
                                 f"needs a leading sample axis")
        lengths = [len(a) for a in arrays]
        if len(set(lengths)) > 1:
            shapes = ", ".join(f"array {i}: {a.shape}" for i, a in enumerate(arrays))
            raise ValueError(f"ArrayDataset: arrays have different lengths {lengths} ({shapes}); "
                             f"every array needs one row per sample")
        self.arrays = arrays

    def __len__(self):
        return len(self.arrays[0])

    def __getitem__(self, index):
        return tuple(a[index] for a in self.arrays)

    def gather(self, indices):
        """The samples at `indices` (an integer array), as one tuple of batched arrays."""
        indices = np.asarray(indices)
        return tuple(np.take(a, indices, axis=0) for a in self.arrays)

    def __repr__(self):
        shapes = ", ".join(f"{a.dtype}{list(a.shape)}" for a in self.arrays)
        return f"ArrayDataset({shapes})"


class Subset:
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset, indices):
        indices = np.asarray(indices)
        if indices.ndim != 1 or (indices.size and indices.dtype.kind not in "iu"):
            raise ValueError(f"Subset: indices must be a 1-d integer array, got "
                             f"{indices.dtype}{list(indices.shape)}")
        n = len(dataset)
        if indices.size and (indices.min() < 0 or indices.max() >= n):
            raise IndexError(f"Subset: indices must lie in [0, {n}) for a dataset of length "
                             f"{n}; got min {indices.min()}, max {indices.max()}")
        self.dataset, self.indices = dataset, indices.astype(np.int64)

    def __len__(self):
        return len(self.indices)

    def __getitem__(self, index):
        return self.dataset[int(self.indices[index])]

    def gather(self, indices):
        return gather(self.dataset, self.indices[np.asarray(indices)])


def gather(dataset, indices):
    """The samples at `indices` as a batch: each component stacked along a new axis 0.

    Uses `dataset.gather` when there is one (one vectorised index per array);
    otherwise calls `dataset[i]` per sample and stacks.
    """
    if hasattr(dataset, "gather"):
        return dataset.gather(indices)
    samples = [dataset[int(i)] for i in indices]
    if not samples:
        raise ValueError("gather: no indices given; a batch needs at least one sample")
    if isinstance(samples[0], tuple):
        return tuple(np.stack([np.asarray(s[k]) for s in samples]) for k in range(len(samples[0])))
    return np.stack([np.asarray(s) for s in samples])


def random_split(dataset, lengths, seed):
    """Split `dataset` into non-overlapping `Subset`s of the given lengths (counts
    summing to len(dataset), or fractions summing to 1) after a seeded shuffle."""
    n = len(dataset)
    lengths = list(lengths)
    if lengths and all(isinstance(f, float) for f in lengths):
        if not np.isclose(sum(lengths), 1.0):
            raise ValueError(f"random_split: fractions {lengths} must sum to 1")
        counts = [int(np.floor(f * n)) for f in lengths]
        for i in range(n - sum(counts)):   # hand out the remainder one by one
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n or any(c < 0 for c in lengths):
        raise ValueError(f"random_split: lengths {lengths} must be non-negative and sum to "
                         f"the dataset's length {n}")
    order = np.random.default_rng(seed).permutation(n)
    bounds = np.cumsum([0] + lengths)
    return [Subset(dataset, order[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]


def _test_count(test_size, n):
    if isinstance(test_size, (float, np.floating)):
        if not 0.0 < test_size < 1.0:
            raise ValueError(f"train_test_split: a fractional test_size must lie in (0, 1), "
                             f"got {test_size}")
        return int(round(test_size * n))
    if not 0 < test_size < n:
        raise ValueError(f"train_test_split: test_size={test_size} must lie in (0, {n}) "
                         f"for {n} samples")
    return int(test_size)


def _stratified_test_indices(labels, n_test, rng):
    """Per class, a share of `n_test` proportional to the class size (largest
    remainders get the leftover places), drawn at random within the class."""
    classes, inverse = np.unique(labels, return_inverse=True)
    sizes = np.bincount(inverse, minlength=len(classes))
    exact = sizes * (n_test / len(labels))
    quota = np.floor(exact).astype(np.int64)
    leftover = n_test - quota.sum()
    quota[np.argsort(-(exact - quota), kind="stable")[:leftover]] += 1
    picked = [rng.permutation(np.flatnonzero(inverse == c))[:q] for c, q in enumerate(quota)]
    return np.concatenate(picked)


def train_test_split(*arrays, test_size=0.25, seed=0, stratify=None):
    """Seeded split of equally long arrays into train and test rows, in
    scikit-learn's order: `x_train, x_test, y_train, y_test = train_test_split(x, y)`.

    test_size: a fraction in (0, 1) or a count. stratify: labels whose class
    proportions the test set keeps (largest-remainder rounding per class). The
    same seed always gives the same split; rows keep their original order within
    each part.
    """
    if not arrays:
        raise ValueError("train_test_split: pass at least one array")
    n = len(ArrayDataset(*arrays))   # checks equal lengths
    n_test = _test_count(test_size, n)
    rng = np.random.default_rng(seed)
    if stratify is None:
        test = rng.permutation(n)[:n_test]
    else:
        stratify = np.asarray(stratify)
        if stratify.shape[:1] != (n,):
            raise ValueError(f"train_test_split: stratify has shape {stratify.shape}; it "
                             f"needs one label per sample ({n})")
        test = _stratified_test_indices(stratify, n_test, rng)
    is_test = np.zeros(n, bool)
    is_test[test] = True
    out = []
    for a in arrays:
        a = np.asarray(a)
        out += [a[~is_test], a[is_test]]
    return out
