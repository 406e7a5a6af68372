"""Run under `mpiexec -n N` with an output directory: N ranks with per-rank batch B
train to the same parameters as one process with batch N*B; the sampler shards
every epoch; metrics average; bars and checkpoints belong to rank 0."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import fgrad  # noqa: E402
import fgrad.distributed as dist  # noqa: E402
import fgrad_nn as fnn  # noqa: E402
from fgrad_nn import data, optim  # noqa: E402
from fgrad_nn import distributed as fnd  # noqa: E402
from fgrad_nn.losses import softmax_cross_entropy  # noqa: E402

dist.init()
comm = dist.world()
r, n = dist.rank(), dist.size()
out_dir = Path(sys.argv[1])
B, SEED, EPOCHS = 8, 3, 2

rng = np.random.default_rng(0)                     # the same data on every rank
x = rng.normal(size=(100, 5)).astype(np.float32)
y = (x[:, 0] + x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 1)
dataset = data.ArrayDataset(x, y)


def build(seed):
    k1, k2 = fgrad.random.split(fgrad.random.key(seed))
    return fnn.Sequential(fnn.Linear(5, 16, key=k1), fnn.GELU(), fnn.Linear(16, 3, key=k2))


def make_step(optimizer, parallel):
    def step(model, state, xb, yb):
        loss, grads = fgrad.value_and_grad(lambda m: softmax_cross_entropy(m(xb), yb))(model)
        if parallel:
            grads = fnd.average_gradients(grads)
        updates, state = optimizer.update(grads, state, model)
        return optim.apply_updates(model, updates), state, loss
    return fgrad.jit(step)


optimizer = optim.sgd(0.1, momentum=0.9)   # sensitive to the gradient scale (Adam is not)

# the sampler: each epoch's shards are disjoint, cover the reference batches, same order
sharded = fnd.ShardedLoader(dataset, B, shuffle=True, seed=SEED)
reference = data.DataLoader(dataset, n * B, shuffle=True, seed=SEED, drop_last=True)
assert len(sharded) == len(reference)
for epoch in range(EPOCHS):
    shards = comm.allgather(sharded.shard(epoch))
    seen = np.concatenate(shards)
    assert len(set(seen.tolist())) == len(seen) == len(reference) * n * B, "overlap"
    expect = reference.order(epoch)[:len(seen)]
    assert sorted(seen.tolist()) == sorted(expect.tolist()), "shards miss samples"
    for g in range(len(reference)):         # global batch g = the ranks' slices in order
        got = np.concatenate([s[g * B:(g + 1) * B] for s in shards])
        assert np.array_equal(got, expect[g * n * B:(g + 1) * n * B]), (epoch, g)

# data-parallel training from a model broadcast from rank 0 (each rank built its own)
model = fnd.broadcast_parameters(build(seed=100 + r))
state = optimizer.init(model)
step = make_step(optimizer, parallel=True)
xb0, yb0 = next(iter(fnd.ShardedLoader(dataset, B, shuffle=True, seed=SEED)))
text = step.lower(model, state, xb0, yb0).as_text()
assert text.count("native:mpi_allreduce (MPI_Allreduce)") == 1, \
    "expected one native gradient allreduce per step"
for epoch in range(EPOCHS):
    for xb, yb in sharded:
        model, state, loss = step(model, state, xb, yb)

# the single-process run with batch n*B, from rank 0's initial model
ref_model = build(seed=100)
ref_state = optimizer.init(ref_model)
ref_step = make_step(optimizer, parallel=False)
for epoch in range(EPOCHS):
    for xb, yb in reference:
        ref_model, ref_state, _ = ref_step(ref_model, ref_state, xb, yb)

mine, ref = fgrad.tree.leaves(model), fgrad.tree.leaves(ref_model)
assert len(mine) == len(ref)
for a, b in zip(mine, ref):
    assert np.allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5), \
        np.abs(np.asarray(a) - np.asarray(b)).max()
moved = max(float(np.abs(np.asarray(a) - np.asarray(b)).max())
            for a, b in zip(mine, fgrad.tree.leaves(build(seed=100))))
assert moved > 1e-2, "training did not change the parameters"

# metrics average across ranks; bars and checkpoints on rank 0 only
assert fnd.average_metrics({"rank": r, "one": 1.0}) == {"rank": (n - 1) / 2, "one": 1.0}
assert fnd.progress(EPOCHS).disable is (True if r else None)
fnd.save_checkpoint(out_dir / f"from_rank_{r}.safetensors", model)
assert (out_dir / "from_rank_0.safetensors").exists()
print(f"OK rank {r}", flush=True)
