"""`DataLoader`: batches of NumPy arrays from a dataset, in seeded order.

    loader = DataLoader(ArrayDataset(x, y), batch_size=128, shuffle=True, seed=0)
    for epoch in range(10):
        for xb, yb in loader:        # each pass is the next epoch
            ...

Order: without shuffling, samples come in index order. With `shuffle=True` the
order of epoch e is a permutation drawn from NumPy's PCG64 seeded with
(seed, e) — `seed` an int or an fgrad.random key — so it is the same on every
run, differs from epoch to epoch, and every sample appears exactly once per
epoch. Each `iter(loader)` uses the current epoch and then advances it;
`loader.set_epoch(e)` chooses the epoch of the next pass (e.g. when resuming).
Random transforms get their own generator per batch, seeded by (seed, epoch,
batch number), so they too are reproducible and independent of prefetching.

Prefetch: with `prefetch=k > 0`, a background thread prepares up to k batches
ahead while the training step runs. That pays when preparing a batch takes
real time and the step releases the GIL (compiled fgrad.jit code, large NumPy
operations): with transforms, with a dataset that builds samples in Python, or
with batches of 1 MiB or more. The default `prefetch=None` turns it on (k=2)
exactly in those cases, and off for small batches of a plain ArrayDataset
(e.g. the 8x8 digits), where one fancy-indexing copy (~20 us) is cheaper than
the thread hand-off (~30 us).

Waiting and stopping: the loop waits for a prefetched batch in short polls, so
Ctrl-C stops it at once even while a batch is being prepared, and `timeout=`
(seconds, as PyTorch's) raises TimeoutError when no batch comes in that time.
Leaving the loop (break, an exception, Ctrl-C) stops the prefetch thread; one
stuck in a sample that never returns is a daemon thread, left behind with a
warning after a bounded wait, so neither the loop nor the interpreter's exit
hangs on it.
"""
import itertools
import queue
import threading
import time
import warnings

import numpy as np

from fgrad_nn._checks import flag

from .dataset import ArrayDataset, Subset, gather

__all__ = ["DataLoader"]

_ORDER_STREAM, _TRANSFORM_STREAM = 0, 1
_DONE = object()
_PREFETCH_BYTES = 1 << 20
_POLL_SECONDS = 0.05      # how often a waiting consumer wakes (Ctrl-C, timeout)
_JOIN_SECONDS = 1.0       # how long leaving the loop waits for a busy prefetch thread


def _row_bytes(dataset):
    """Bytes per sample of an ArrayDataset (or a Subset of one); None for datasets
    that build samples in Python."""
    if isinstance(dataset, Subset):
        return _row_bytes(dataset.dataset)
    if isinstance(dataset, ArrayDataset):
        return sum(a[:1].nbytes for a in dataset.arrays)
    return None


def _seed_words(seed):
    """An int seed or an fgrad.random key (uint32 words) as SeedSequence entropy."""
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        if seed < 0:
            raise ValueError(f"DataLoader: seed must be non-negative, got {seed}")
        return [int(seed)]
    words = np.asarray(seed)
    if words.dtype.kind in "u" and words.ndim == 1 and words.size > 0:
        return [int(w) for w in words]
    raise TypeError(f"DataLoader: seed must be a non-negative int or an fgrad.random key "
                    f"(uint32 array), got {type(seed).__name__} {getattr(words, 'dtype', '')}"
                    f"{list(getattr(words, 'shape', ()))}")


class _Failure:
    def __init__(self, error):
        self.error = error


class DataLoader:
    """Iterate over `dataset` in batches of `batch_size` (see the module docstring).

    drop_last: leave out the final, smaller batch. transforms: a sequence of
    data.transforms objects applied in order to each batch. prefetch: number of
    batches a background thread prepares ahead (0 off; None decides, see above).
    timeout: with prefetching, the seconds to wait for a batch before raising
    TimeoutError (None: wait as long as it takes).
    """

    def __init__(self, dataset, batch_size, shuffle=False, seed=None, drop_last=False,
                 transforms=(), prefetch=None, timeout=None):
        if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"DataLoader: batch_size must be a positive int, got {batch_size!r}")
        if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ValueError(f"DataLoader: timeout must be a positive number of seconds or "
                             f"None, got {timeout!r}")
        self.timeout = timeout
        self.shuffle = flag("DataLoader", "shuffle", shuffle)
        self.drop_last = flag("DataLoader", "drop_last", drop_last)
        self.transforms = tuple(transforms)
        needs_seed = [type(t).__name__ for t in self.transforms if getattr(t, "random", False)]
        if seed is None and (self.shuffle or needs_seed):
            why = "shuffle=True" if self.shuffle else f"random transforms {needs_seed}"
            raise ValueError(f"DataLoader: {why} needs seed= (an int or an fgrad.random key) "
                             f"so that the order is reproducible")
        for t in self.transforms:
            if not (callable(t) and hasattr(t, "index")):
                raise TypeError(f"DataLoader: transform {t!r} must be callable as t(array, rng) "
                                f"and have an `index` (the batch component it changes)")
        self.dataset, self.batch_size = dataset, int(batch_size)
        self._seed = None if seed is None else _seed_words(seed)
        if prefetch is None:
            row = _row_bytes(dataset)
            heavy = row is None or row * self.batch_size >= _PREFETCH_BYTES
            prefetch = 2 if (self.transforms or heavy) else 0
        self.prefetch = int(prefetch)
        self.epoch = 0

    def __len__(self):
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def set_epoch(self, epoch):
        """Make the next pass epoch `epoch` (its order and random transforms)."""
        self.epoch = int(epoch)

    def order(self, epoch):
        """The sample indices of epoch `epoch`, in the order the loader visits them."""
        n = len(self.dataset)
        if not self.shuffle:
            return np.arange(n)
        rng = np.random.default_rng(np.random.SeedSequence(self._seed + [_ORDER_STREAM, epoch]))
        return rng.permutation(n)

    def __iter__(self):
        epoch = self.epoch
        self.epoch += 1
        batches = self._batches(epoch)
        return self._prefetched(batches) if self.prefetch > 0 else batches

    def _batches(self, epoch):
        order = self.order(epoch)
        for b in range(len(self)):
            indices = order[b * self.batch_size:(b + 1) * self.batch_size]
            yield self._transform(gather(self.dataset, indices), epoch, b)

    def _transform(self, batch, epoch, number):
        if not self.transforms:
            return batch
        rng = None
        if self._seed is not None:
            entropy = self._seed + [_TRANSFORM_STREAM, epoch, number]
            rng = np.random.default_rng(np.random.SeedSequence(entropy))
        single = not isinstance(batch, tuple)
        parts = [batch] if single else list(batch)
        for t in self.transforms:
            if not -len(parts) <= t.index < len(parts):
                raise IndexError(f"DataLoader: transform {type(t).__name__} has index "
                                 f"{t.index} but batches have {len(parts)} component(s)")
            parts[t.index] = t(parts[t.index], rng)
        return parts[0] if single else tuple(parts)

    def _prefetched(self, batches):
        """Run `batches` in a daemon thread, at most `prefetch` batches ahead."""
        ready = queue.Queue(maxsize=self.prefetch)
        stop = threading.Event()

        def put(item):
            while not stop.is_set():
                try:
                    ready.put(item, timeout=_POLL_SECONDS)
                    return True
                except queue.Full:
                    pass
            return False

        def produce():
            try:
                for batch in batches:
                    if not put(batch):
                        return
                put(_DONE)
            except BaseException as e:   # re-raised in the consumer's thread
                put(_Failure(e))

        worker = threading.Thread(target=produce, name="DataLoader-prefetch", daemon=True)
        worker.start()
        interrupted = False
        try:
            for number in itertools.count():
                item = self._wait(ready, number)
                if item is _DONE:
                    return
                if isinstance(item, _Failure):
                    raise item.error
                yield item
        except KeyboardInterrupt:
            interrupted = True
            raise
        finally:
            stop.set()
            if not interrupted:   # after Ctrl-C, leave at once
                worker.join(timeout=_JOIN_SECONDS)
                if worker.is_alive():
                    warnings.warn(
                        f"DataLoader: the prefetch thread is still preparing a batch "
                        f"{_JOIN_SECONDS:g} s after the loop ended; it is left running as "
                        f"a daemon thread and stops after that batch. If a sample never "
                        f"returns, look at the dataset's __getitem__/gather or transforms",
                        RuntimeWarning, stacklevel=2)

    def _wait(self, ready, number):
        """The next item from the prefetch queue, waiting in short polls so that
        Ctrl-C is seen at once; TimeoutError after `self.timeout` seconds."""
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while True:
            try:
                return ready.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(
                        f"DataLoader: batch {number} was not ready after timeout="
                        f"{self.timeout} s; a sample or transform is slow or hangs (the "
                        f"prefetch thread is still working on it)") from None
