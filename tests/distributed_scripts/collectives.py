"""Run under `mpiexec -n N`: every collective eagerly, under jit and vmap, and its
JVP and VJP, on rank-dependent float64 data. Prints "OK rank r" when all pass;
any failure raises, which aborts the whole job (a nonzero exit)."""
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import fgrad  # noqa: E402
import fgrad.distributed as dist  # noqa: E402
import fgrad.numpy as fnp  # noqa: E402
from fgrad._src.cpu import outputs  # noqa: E402

dist.init()
comm = dist.world()
r, n = dist.rank(), dist.size()


def data(shape, seed):
    """Rank-dependent float64 values (distinct across ranks, so max/min do not tie)."""
    return np.random.default_rng([seed, r]).normal(size=shape)


def everyone(x):
    """Every rank's NumPy value, stacked (a reference computed outside fgrad)."""
    return np.stack(comm.allgather(np.asarray(x)))


def close(a, b, tol=1e-10, what=""):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (what, a.shape, b.shape)
    assert np.allclose(a, b, rtol=tol, atol=tol), (what, a, b)


# the functions under test, with their NumPy references
x = data((3, 4), 0)
cases = {
    "allreduce sum": (lambda v: dist.allreduce(v, "sum"), lambda X: X.sum(0)),
    "allreduce mean": (lambda v: dist.allreduce(v, "mean"), lambda X: X.mean(0)),
    "allreduce max": (lambda v: dist.allreduce(v, "max"), lambda X: X.max(0)),
    "allreduce min": (lambda v: dist.allreduce(v, "min"), lambda X: X.min(0)),
    "allgather": (lambda v: dist.allgather(v), lambda X: X),
    "broadcast": (lambda v: dist.broadcast(v, n - 1), lambda X: X[n - 1]),
}
scatter_x = data((n, 3, 2), 1)
scatter = (lambda v: dist.reduce_scatter(v), lambda X: X.sum(0)[r])

for name, (f, ref) in list(cases.items()) + [("reduce_scatter", scatter)]:
    arg = scatter_x if name == "reduce_scatter" else x
    eager = np.asarray(f(fnp.asarray(arg)))
    assert eager.dtype == np.float64, (name, eager.dtype)
    close(eager, ref(everyone(arg)), what=name)
    jitted = np.asarray(fgrad.jit(f)(fnp.asarray(arg)))
    assert np.array_equal(jitted, eager), (name, "jit differs from eager")

    # JVP against central differences on every rank (each rank its own direction)
    v = data(arg.shape, 2)
    _, tangent = fgrad.jvp(f, (fnp.asarray(arg),), (fnp.asarray(v),))
    eps = 1e-6
    ahead, behind = f(fnp.asarray(arg + eps * v)), f(fnp.asarray(arg - eps * v))
    fd = (np.asarray(ahead) - np.asarray(behind)) / (2 * eps)
    close(tangent, fd, tol=1e-6, what=name + " jvp")

    # VJP: the ranks together form one linear map, so sum_r <u_r, J v> = sum_r <J^T u, v_r>
    u = data(eager.shape, 3)
    for transform in (lambda g: g, fgrad.jit):
        out, pullback = fgrad.vjp(f, fnp.asarray(arg))
        (ct,) = transform(pullback)(fnp.asarray(u))
        lhs = comm.allreduce(float(np.sum(u * np.asarray(tangent))))
        rhs = comm.allreduce(float(np.sum(np.asarray(ct) * v)))
        assert abs(lhs - rhs) <= 1e-9 * max(1.0, abs(lhs)), (name, "vjp", lhs, rhs)

    # vmap equals a loop over the batch
    xs = np.stack([arg + k for k in range(3)])
    mapped = np.asarray(fgrad.vmap(f)(fnp.asarray(xs)))
    looped = np.stack([np.asarray(f(fnp.asarray(a))) for a in xs])
    close(mapped, looped, what=name + " vmap")

# vmap over a non-leading axis of reduce_scatter keeps the rank axis leading
xs = np.stack([scatter_x * (k + 1) for k in range(2)], axis=1)        # (n, 2, 3, 2)
mapped = np.asarray(fgrad.vmap(dist.reduce_scatter, in_axes=1)(fnp.asarray(xs)))
looped = np.stack([np.asarray(dist.reduce_scatter(fnp.asarray(xs[:, k]))) for k in range(2)])
close(mapped, looped, what="reduce_scatter vmap axis 1")

# several collectives in one jitted program run in program order; the plan labels them
def program(v):
    a = dist.allreduce(v * 2.0)
    b = dist.allgather(a[0])
    return dist.broadcast(b.sum() + v, 0)

f = fgrad.jit(program)
close(f(fnp.asarray(x)), program(fnp.asarray(x)), tol=0, what="program")
text = f.lower(fnp.asarray(x)).as_text()
for label in ("native:mpi_allreduce (MPI_Allreduce)", "native:mpi_allgather (MPI_Allgather)",
              "native:mpi_broadcast (MPI_Bcast)"):
    assert label in text, (label, text)
scattered = fgrad.jit(dist.reduce_scatter).lower(fnp.asarray(scatter_x)).as_text()
assert "native:mpi_reduce_scatter (MPI_Reduce_scatter_block)" in scattered, scattered

# in debug mode (checked when compiling) collectives stay Python steps that compare shapes
dist.set_debug(True)
checked = fgrad.jit(lambda v: program(v) * 1.0)
close(checked(fnp.asarray(x)), f(fnp.asarray(x)), tol=0, what="debug program")
assert "python:mpi_allreduce (calls mpi4py)" in checked.lower(fnp.asarray(x)).as_text()
dist.set_debug(False)

# 0-d operands keep their shape; collectives inside a jitted scan run once per step
scalar = fnp.asarray(np.float64(r + 1))
assert dist.allreduce(scalar).shape == () and float(dist.allreduce(scalar)) == n * (n + 1) / 2
xs = data((3, 2), 5)
carry, _ = fgrad.jit(lambda v: fgrad.lax.scan(lambda c, row: (c + dist.allreduce(row), None),
                                              fnp.zeros(2, np.float64), v))(fnp.asarray(xs))
close(carry, everyone(xs).sum(axis=(0, 1)), what="allreduce in scan")

# a donated operand's buffer takes the allreduce's result (MPI_IN_PLACE); big outputs
# of collectives reuse memory once dropped, never while held
big = data((1 << 16,), 6)                       # 512 KB: served from reused memory
expect = everyone(big).sum(0)
donating = fgrad.jit(dist.allreduce, donate_argnums=0)
assert "(in place of donated input 0)" in donating.lower(fnp.asarray(big)).as_text()
operand = fnp.asarray(big)
address = operand._value.ctypes.data
summed = donating(operand)
assert summed._value.ctypes.data == address
close(summed, expect, what="donated allreduce")
for g in (dist.allreduce, fgrad.jit(dist.allreduce)):
    held = g(fnp.asarray(big))
    kept = np.array(held)
    address = g(fnp.asarray(big))._value.ctypes.data       # dropped at once
    again = g(fnp.asarray(2 * big))
    assert again._value.ctypes.data == address and outputs.kept(again._value.base)
    assert np.array_equal(np.asarray(held), kept) and not np.shares_memory(
        np.asarray(held), np.asarray(again))
    close(again, 2 * expect, what="reused output")

# eager allreduces of a kind seen before run natively (cpu.dispatch): same bits; with
# jit disabled they take the mpi4py path
from mpi4py import MPI  # noqa: E402
from fgrad._src.distributed import collectives  # noqa: E402
small = data((5, 3), 7).astype(np.float32)
for op, ref in (("sum", np.sum), ("max", np.max)):
    first = dist.allreduce(fnp.asarray(small), op)
    second, third = (dist.allreduce(fnp.asarray(small), op) for _ in range(2))
    assert collectives._native[((5, 3), small.dtype, False, op, MPI._handleof(comm))]
    assert np.array_equal(np.asarray(third), np.asarray(first)) and third.dtype == np.float32
    close(third, ref(everyone(small), axis=0), tol=1e-6, what="native eager " + op)
    fgrad.config.update("disable_jit", True)
    try:
        assert np.array_equal(np.asarray(dist.allreduce(fnp.asarray(small), op)),
                              np.asarray(first))
    finally:
        fgrad.config.update("disable_jit", False)

# a collective called from native code (eager allreduce of a kind seen before, a small
# jitted program) lets this rank's other Python threads run while it waits for the others
ticks, stop = [0], threading.Event()


def tick():
    while not stop.is_set():
        ticks[0] += 1
        time.sleep(0.001)


for g in (dist.allreduce, fgrad.jit(dist.allreduce)):
    g(fnp.asarray(small)), g(fnp.asarray(small))              # native from here on
    stop.clear()
    ticker = threading.Thread(target=tick)
    ticker.start()
    dist.barrier()
    if r == 0:
        time.sleep(0.5)                                       # the others wait in g
    start = ticks[0]
    g(fnp.asarray(small))
    waited = ticks[0] - start
    stop.set()
    ticker.join()
    assert r == 0 or waited >= 5, (g, waited)         # about 1 with the GIL held

# send/recv around a ring, eagerly and under jit
nxt, prev = (r + 1) % n, (r - 1) % n
msg = data((5,), 4)


def ring(v):
    if r % 2 == 0:
        dist.send(v, nxt, tag=7)
        return dist.recv((5,), np.float64, prev, tag=7)
    got = dist.recv((5,), np.float64, prev, tag=7)
    dist.send(v, nxt, tag=7)
    return got


if n > 1:
    expect = everyone(msg)[prev]
    close(ring(fnp.asarray(msg)), expect, tol=0, what="ring eager")
    close(fgrad.jit(ring)(fnp.asarray(msg)), expect, tol=0, what="ring jit")

dist.barrier()
print(f"OK rank {r}", flush=True)
