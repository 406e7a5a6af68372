"""Data-parallel training over MPI (start with `mpiexec -n N python train.py`).

Every rank holds the whole model and trains on its own shard of each batch:

- `ShardedLoader`: a DataLoader whose global batch of `size() * batch_size`
  samples (drawn in the order a seed fixes, the same on every rank) is split
  into one slice per rank, so each epoch every sample is seen once across the
  ranks (the last incomplete global batch is dropped, as drop_last does).
- `broadcast_parameters(tree)`: rank 0's values on every rank, so all ranks
  start from one model.
- `average_gradients(grads)`: the mean over ranks, with ONE allreduce over a
  flat bucket holding every leaf (one per dtype where dtypes differ); works
  eagerly and inside a jitted step. Equal shards make N ranks with batch B
  take the same steps as one process with batch N*B.
- `average_metrics(metrics)`: a dict of scalars averaged over the ranks.
- `is_main()`, `progress(epochs)`, `save_checkpoint(path, tree)`: progress bars
  and checkpoint files on rank 0 only.
"""
import numpy as np

import fgrad
import fgrad.distributed as dist
import fgrad.numpy as fnp
from fgrad_nn import checkpoint
from fgrad_nn.data.dataset import gather
from fgrad_nn.data.loader import DataLoader
from fgrad_nn.training import Progress
from fgrad_nn.tree_tools import is_array


def is_main(comm=None):
    """Whether this process is rank 0 (the one that prints and writes files)."""
    return dist.rank(comm) == 0


class ShardedLoader(DataLoader):
    """This rank's part of each global batch; `batch_size` is the per-rank batch.

    Takes DataLoader's arguments (shuffle, seed, transforms, ...); drop_last is
    always on so that every rank runs the same number of equal-sized steps.
    Random transforms draw per (epoch, global batch, rank).
    """

    def __init__(self, dataset, batch_size, *, comm=None, **kwargs):
        kwargs["drop_last"] = True
        super().__init__(dataset, batch_size, **kwargs)
        self.rank, self.size = dist.rank(comm), dist.size(comm)

    def __len__(self):
        return len(self.dataset) // (self.batch_size * self.size)

    def shard(self, epoch):
        """The sample indices this rank visits in epoch `epoch`, in order."""
        order, b = self.order(epoch), self.batch_size
        return np.concatenate([order[(g * self.size + self.rank) * b:][:b]
                               for g in range(len(self))] or [np.zeros(0, int)])

    def _batches(self, epoch):
        indices = self.shard(epoch)
        b = self.batch_size
        for g in range(len(self)):
            yield self._transform(gather(self.dataset, indices[g * b:(g + 1) * b]), epoch,
                                  g * self.size + self.rank)


def _bucketed(tree, collective):
    """Apply `collective` to the array leaves of `tree` as one flat bucket per dtype."""
    leaves, treedef = fgrad.tree.flatten(tree)
    arrays = [i for i, x in enumerate(leaves) if is_array(x)]
    out = list(leaves)
    for dtype in dict.fromkeys(np.dtype(leaves[i].dtype) for i in arrays):
        members = [i for i in arrays if np.dtype(leaves[i].dtype) == dtype]
        flat = fnp.concatenate([fnp.ravel(leaves[i]) for i in members])
        flat = collective(flat)
        start = 0
        for i in members:
            n = int(np.prod(leaves[i].shape))
            out[i] = fnp.reshape(flat[start:start + n], leaves[i].shape)
            start += n
    return fgrad.tree.unflatten(treedef, out)


def average_gradients(grads, comm=None):
    """The mean of `grads` (a pytree) over all ranks, by one allreduce per dtype."""
    return _bucketed(grads, lambda flat: dist.allreduce(flat, "mean", comm=comm))


def broadcast_parameters(params, root=0, comm=None):
    """`params` (a pytree, e.g. a Module) with rank `root`'s values on every rank."""
    return _bucketed(params, lambda flat: dist.broadcast(flat, root, comm=comm))


def average_metrics(metrics, comm=None):
    """A dict of scalars averaged over the ranks (Python floats)."""
    names = sorted(metrics)
    values = np.array([float(metrics[k]) for k in names], np.float64)
    mean = np.asarray(dist.allreduce(values, "mean", comm=comm))
    return dict(zip(names, map(float, mean)))


def progress(epochs, comm=None, **kwargs):
    """A training.Progress that shows bars on rank 0 and stays silent elsewhere."""
    if not is_main(comm):
        kwargs["disable"] = True
    return Progress(epochs, **kwargs)


def save_checkpoint(path, tree, metadata=None, comm=None):
    """checkpoint.save on rank 0 only; every rank waits until the file is written."""
    if is_main(comm):
        checkpoint.save(path, tree, metadata=metadata)
    dist.barrier(comm)
