"""Batch transforms for `DataLoader(transforms=...)`.

A transform is called on one component of a NumPy batch, `t(batch[t.index], rng)`,
and returns the new component; `index` picks the component (0: inputs, 1: labels
for `(x, y)` batches). `rng` is a `numpy.random.Generator` that the loader seeds
from (seed, epoch, batch number), so random transforms are reproducible;
deterministic transforms ignore it and can be called on their own: `Flatten()(x)`.
Images are NCHW: (batch, channels, height, width).
"""
import numpy as np

__all__ = ["Normalize", "Flatten", "OneHot", "RandomCrop", "RandomHorizontalFlip"]


def _images(name, x):
    x = np.asarray(x)
    if x.ndim != 4:
        raise ValueError(f"{name}: expects an NCHW image batch (4-d), got shape {x.shape}; "
                         f"reshape single-channel images to (N, 1, H, W)")
    return x


def _need_rng(name, rng):
    if rng is None:
        raise ValueError(f"{name} is random: call it with a numpy Generator, or give the "
                         f"DataLoader a seed= so it can make one per batch")
    return rng


class Normalize:
    """(x - mean) / std per channel (axis 1; features for 2-d batches).

    Integer inputs become float32; float inputs keep their dtype.
    """
    random = False

    def __init__(self, mean, std, index=0):
        self.mean = np.asarray(mean, np.float64)
        self.std = np.asarray(std, np.float64)
        if self.mean.ndim > 1 or self.std.ndim > 1:
            raise ValueError(f"Normalize: mean and std must be scalars or 1-d (one per "
                             f"channel), got shapes {self.mean.shape} and {self.std.shape}")
        if np.any(self.std == 0):
            raise ValueError(f"Normalize: std {self.std} has a zero; division by zero")
        self.index = index

    def __call__(self, x, rng=None):
        x = np.asarray(x)
        dtype = x.dtype if x.dtype.kind == "f" else np.dtype(np.float32)
        channels = max(self.mean.size, self.std.size)
        if self.mean.ndim == 1 or self.std.ndim == 1:
            if x.ndim < 2 or x.shape[1] != channels:
                raise ValueError(f"Normalize: {channels} channel means/stds but the batch "
                                 f"has shape {x.shape} (channels on axis 1)")
        shape = (1, -1) + (1,) * (x.ndim - 2) if x.ndim >= 2 else (-1,)
        mean = self.mean.astype(dtype).reshape(shape)
        std = self.std.astype(dtype).reshape(shape)
        return (x.astype(dtype) - mean) / std


class Flatten:
    """(N, ...) -> (N, prod(...)): one feature vector per sample."""
    random = False

    def __init__(self, index=0):
        self.index = index

    def __call__(self, x, rng=None):
        x = np.asarray(x)
        return x.reshape(x.shape[0], -1)


class OneHot:
    """Integer labels (N,) -> (N, num_classes) with a 1 at each label."""
    random = False

    def __init__(self, num_classes, dtype=np.float32, index=1):
        self.num_classes, self.dtype, self.index = int(num_classes), np.dtype(dtype), index

    def __call__(self, y, rng=None):
        y = np.asarray(y)
        if y.dtype.kind not in "iu":
            raise ValueError(f"OneHot: labels must be integers, got {y.dtype}")
        if y.size and (y.min() < 0 or y.max() >= self.num_classes):
            raise ValueError(f"OneHot: labels must lie in [0, {self.num_classes}), got values "
                             f"from {y.min()} to {y.max()}")
        return (y[..., None] == np.arange(self.num_classes)).astype(self.dtype)


class RandomCrop:
    """Pad each image by `padding` pixels of `fill` on every side, then cut a
    `size` window at a random offset (drawn per image)."""
    random = True

    def __init__(self, size, padding=0, fill=0, index=0):
        self.size = (size, size) if np.isscalar(size) else tuple(size)
        self.padding, self.fill, self.index = int(padding), fill, index

    def __call__(self, x, rng=None):
        x = _images("RandomCrop", x)
        rng = _need_rng("RandomCrop", rng)
        p, (h, w) = self.padding, self.size
        n, c, hp, wp = x.shape[0], x.shape[1], x.shape[2] + 2 * p, x.shape[3] + 2 * p
        if h > hp or w > wp:
            raise ValueError(f"RandomCrop: crop {self.size} is larger than the padded image "
                             f"({hp}, {wp}) (image {x.shape[2:]}, padding {p})")
        padded = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=self.fill)
        top = rng.integers(0, hp - h + 1, size=n)
        left = rng.integers(0, wp - w + 1, size=n)
        rows = (top[:, None] + np.arange(h))[:, None, :, None]
        cols = (left[:, None] + np.arange(w))[:, None, None, :]
        return padded[np.arange(n)[:, None, None, None], np.arange(c)[None, :, None, None],
                      rows, cols]


class RandomHorizontalFlip:
    """Mirror each image left-right with probability p."""
    random = True

    def __init__(self, p=0.5, index=0):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"RandomHorizontalFlip: p must lie in [0, 1], got {p}")
        self.p, self.index = p, index

    def __call__(self, x, rng=None):
        x = _images("RandomHorizontalFlip", x)
        flip = _need_rng("RandomHorizontalFlip", rng).random(x.shape[0]) < self.p
        return np.where(flip[:, None, None, None], x[..., ::-1], x)
