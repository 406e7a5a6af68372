"""Training helpers: a progress bar, a metrics history, loss/accuracy curves,
and a jitted forward-only `evaluate`.

    progress = Progress(epochs, disable=None)          # None: only on a terminal
    history = History()
    for epoch in progress.epochs():
        for xb, yb in progress.batches(train_loader):
            params, state, loss, acc = step(params, state, xb, yb)
            progress.log(loss=loss, accuracy=acc)
        history.append(epoch=epoch, **progress.means(), **{
            f"test_{k}": v for k, v in evaluate(apply, params, test_loader).items()})
        progress.summary(**history.last())
    plot_curves(history, "curves.png")
"""
import json
import math
import os

import numpy as np

import fgrad
import fgrad.numpy as fnp
from fgrad import nn
from fgrad_nn._atomic import write_atomically
from fgrad_nn._extras import require

__all__ = ["Progress", "History", "plot_curves", "evaluate"]


def _scalar(name, value):
    """A Python number from a number or a one-element array (NumPy or fgrad)."""
    if type(value) in (bool, int, float):
        return value
    array = np.asarray(value)
    if array.size != 1:
        raise ValueError(f"metric {name!r} must be a scalar, got an array of shape {array.shape}")
    return array.item()


class Progress:
    """tqdm bars: one over epochs, and one over each epoch's batches showing the
    running means of the logged metrics (e.g. loss and accuracy).

    disable: True for no output, None (default) for output only when the
    stream is a terminal (quiet under pytest and in logs), False to force it.
    file: the stream (default stderr).
    """

    def __init__(self, epochs, *, disable=None, file=None):
        self.num_epochs = int(epochs)
        self.disable, self.file = disable, file
        self._epoch_bar = self._batch_bar = None
        self._sums, self._count = {}, 0

    def _bar(self, iterable, **kwargs):
        tqdm = require("tqdm.auto", "fgrad_nn.training.Progress (progress bars)", "nn").tqdm
        return tqdm(iterable, disable=self.disable, file=self.file, dynamic_ncols=True, **kwargs)

    def epochs(self, start=0):
        """Yield the epoch numbers start .. epochs-1 under the epoch bar."""
        self._epoch_bar = self._bar(range(start, self.num_epochs), desc="epochs",
                                    initial=start, total=self.num_epochs)
        try:
            yield from self._epoch_bar
        finally:
            self._epoch_bar.close()

    def batches(self, loader, desc=None):
        """Yield the batches of `loader` under a batch bar (removed when done) and
        reset the running means."""
        self._sums, self._count = {}, 0
        total = len(loader) if hasattr(loader, "__len__") else None
        self._batch_bar = self._bar(loader, desc=desc or "batches", total=total, leave=False)
        try:
            yield from self._batch_bar
        finally:
            self._batch_bar.close()

    def log(self, **metrics):
        """Record one batch's metrics (numbers or scalar arrays); shows running means."""
        for name, value in metrics.items():
            self._sums[name] = self._sums.get(name, 0.0) + float(_scalar(name, value))
        self._count += 1
        if self._batch_bar is not None:
            self._batch_bar.set_postfix(_formatted(self.means()), refresh=False)

    def means(self):
        """The mean of each metric logged since the epoch's batches began."""
        return {name: total / self._count for name, total in self._sums.items()}

    def summary(self, **metrics):
        """Show `metrics` (e.g. the epoch's train and test results) on the epoch bar."""
        if self._epoch_bar is not None:
            self._epoch_bar.set_postfix(_formatted(metrics), refresh=True)


def _formatted(metrics):
    return {k: f"{v:.4g}" if isinstance(v, float) else v for k, v in metrics.items()}


class History:
    """Metrics recorded one row at a time (per epoch or per step).

    `append(epoch=1, loss=0.3)` adds a row; `history["loss"]` or `as_dict()` give
    columns as lists, with None where a row lacked that metric.
    """

    def __init__(self, rows=()):
        self.rows = []
        for row in rows:
            self.append(**row)

    def append(self, **metrics):
        self.rows.append({name: _scalar(name, value) for name, value in metrics.items()})

    def __len__(self):
        return len(self.rows)

    def keys(self):
        names = {}
        for row in self.rows:
            names.update(dict.fromkeys(row))
        return list(names)

    def __getitem__(self, name):
        if name not in self.keys():
            raise KeyError(f"History has no metric {name!r}; it has {self.keys()}")
        return [row.get(name) for row in self.rows]

    def as_dict(self):
        return {name: self[name] for name in self.keys()}

    def last(self):
        """The most recent row (an empty dict before the first append)."""
        return dict(self.rows[-1]) if self.rows else {}

    def to_json(self, path=None):
        """The history as JSON (columns); also written to `path` if given, atomically
        (see `checkpoint.save`: the old file or the new, modes kept, links followed)."""
        text = json.dumps(self.as_dict(), indent=1, allow_nan=True)
        if path is not None:
            write_atomically(path, lambda file: file.write(text.encode()))
        return text

    @classmethod
    def from_json(cls, text):
        columns = json.loads(text)
        n = max((len(v) for v in columns.values()), default=0)
        return cls([{k: v[i] for k, v in columns.items() if v[i] is not None}
                    for i in range(n)])


def plot_curves(history, path, *, x=None, title=None):
    """Save the history's loss and accuracy curves as a PNG at `path` (atomically,
    as `checkpoint.save` writes: the old file or the new, modes kept, links followed).

    Metrics whose names contain "loss" share the left panel, those containing
    "acc" the right one. x: the metric on the horizontal axis ("epoch" or
    "step" when present, else the row number). Returns `path`.
    """
    FigureCanvasAgg = require("matplotlib.backends.backend_agg", "plot_curves",
                              "examples").FigureCanvasAgg
    Figure = require("matplotlib.figure", "plot_curves", "examples").Figure

    columns = history.as_dict() if isinstance(history, History) else dict(history)
    if x is None:
        x = next((k for k in ("epoch", "step") if k in columns), None)
    n = max((len(v) for v in columns.values()), default=0)
    xs = columns[x] if x is not None else list(range(n))
    panels = [(kind, [k for k in columns if kind in k.lower() and k != x])
              for kind in ("loss", "acc")]
    panels = [(kind, names) for kind, names in panels if names]
    if not panels:
        raise ValueError(f"plot_curves: no metric named like 'loss' or 'acc*' in "
                         f"{list(columns)}")
    # A bare Figure on the Agg canvas: no display needed, and pyplot's global
    # state (the user's own figures and backend) is left alone.
    fig = Figure(figsize=(5 * len(panels), 3.6))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(panels), squeeze=False)
    for ax, (kind, names) in zip(axes[0], panels):
        for name in names:
            ys = [math.nan if v is None else v for v in columns[name]]
            ax.plot(xs, ys, marker="o" if n <= 30 else None, markersize=3, label=name)
        ax.set_xlabel(x or "row")
        ax.set_ylabel("loss" if kind == "loss" else "accuracy")
        ax.grid(alpha=0.3)
        ax.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_atomically(path, lambda file: fig.savefig(file, format="png", dpi=100))
    return path


def _batch_metrics(apply_fn, loss_fn, params, x, y):
    """(sum of per-example losses, number of correct predictions) for one batch."""
    logits = apply_fn(params, x)
    if y.ndim == logits.ndim:            # one-hot or probabilities
        labels = fnp.argmax(y, axis=-1)
        targets = y
    else:                                # integer class labels
        labels = y
        targets = nn.one_hot(y, logits.shape[-1], dtype=logits.dtype)
    if loss_fn is None:       # (a class with target 0 adds 0, even at a -inf logit)
        terms = fnp.where(targets != 0, targets * nn.log_softmax(logits, axis=-1), 0)
        losses = -fnp.sum(terms, axis=-1)
    else:
        losses = loss_fn(logits, y)
    total = fnp.sum(losses) if losses.ndim else losses * x.shape[0]
    correct = fnp.sum(fnp.argmax(logits, axis=-1) == labels)
    return total, correct


_batch_metrics_jit = fgrad.jit(_batch_metrics, static_argnums=(0, 1))


def evaluate(apply_fn, params, loader, loss_fn=None):
    """Mean loss and accuracy of `apply_fn(params, x) -> logits` over a loader of
    (x, y) batches; forward pass only (no gradients), compiled with fgrad.jit.

    y: integer class labels (N,) or one-hot / probabilities (N, K).
    loss_fn(logits, y): per-example losses (N,) or the batch mean; default
    softmax cross-entropy. The compiled program is reused across calls when
    `apply_fn` and `loss_fn` are the same objects (they are jit static arguments),
    and per batch shape. Returns {"loss": float, "accuracy": float}.
    """
    loss_sum, correct, count = 0.0, 0, 0
    for batch in loader:
        if not (isinstance(batch, (tuple, list)) and len(batch) == 2):
            raise ValueError("evaluate: the loader must yield (x, y) batches")
        x, y = batch
        total, right = _batch_metrics_jit(apply_fn, loss_fn, params, x, y)
        loss_sum += float(total)
        correct += int(right)
        count += len(x)
    if count == 0:
        raise ValueError("evaluate: the loader yielded no batches")
    return {"loss": loss_sum / count, "accuracy": correct / count}
