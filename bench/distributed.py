"""Allreduce bandwidth, data-parallel throughput and a ring-allreduce scaling
estimate for fgrad.distributed. Run under MPI (the `mpi` extra):

    mpiexec -n 2 python bench/distributed.py            # bandwidth + cost model
    mpiexec -n 1 python bench/distributed.py --train    # training throughput, 1 rank
    mpiexec -n 2 python bench/distributed.py --train    # ... 2 ranks

Bandwidth: float32 Allreduce (sum) of 1 KB to 100 MB for raw mpi4py on NumPy
buffers (into one reused buffer), fgrad eager (`allreduce`), fgrad inside jit
(a program that is the one collective) and jit with the operand donated (the
result written over it: MPI_IN_PLACE), interleaved call by call so that load
from other work hits all alike; the minimum over the repeats and the median of
the per-round ratios. mpi4py into a fresh `np.empty_like` per call is timed in
a block of its own (its freed buffers make malloc return memory that the next
call, whichever it is, faults in again). The cost model fits t = a + n*b to
mpi4py's times (n bytes) and applies the ring allreduce's
2(p-1)*a + 2(p-1)/p*n*b' (b' = 8/25e9 s per byte, a 25 Gb/s network) to the
ResMLP example's gradient, against the measured compute time of one step.
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import fgrad  # noqa: E402
import fgrad.distributed as dist  # noqa: E402
import fgrad.numpy as fnp  # noqa: E402

SIZES = [2 ** k for k in range(10, 27, 2)] + [100 * 2 ** 20]       # bytes, 1 KB .. 100 MB


def slowest_times(fns, repeats):
    """Per function, the time of each of `repeats` rounds (one call of every
    function per round, each after a barrier), as the slowest rank saw it."""
    from mpi4py.MPI import MAX
    comm = dist.world()
    times = np.empty((len(fns), repeats))
    for r in range(repeats):
        for i, fn in enumerate(fns):
            comm.Barrier()
            t = time.perf_counter()
            fn()
            times[i, r] = time.perf_counter() - t
    slowest = np.empty_like(times)     # the slowest rank decides a collective's time
    comm.Allreduce(times, slowest, op=MAX)
    return slowest


def bandwidth():
    from mpi4py import MPI
    comm = dist.world()
    rows = []
    jitted = fgrad.jit(dist.allreduce)
    donating = fgrad.jit(dist.allreduce, donate_argnums=0)
    for nbytes in SIZES:
        x = np.ones(nbytes // 4, np.float32)
        out = np.empty_like(x)
        fx = fnp.asarray(x)
        donated = [fnp.zeros(x.shape, x.dtype)]     # zeros: summing them stays finite

        def donate():
            donated[0] = donating(donated[0])

        for warm in (jitted, dist.allreduce):        # compile (and warm up) outside the timing
            warm(fx), warm(fx)
        donate()
        repeats = 200 if nbytes <= 2 ** 20 else 30 if nbytes <= 2 ** 24 else 10
        t = slowest_times([lambda: comm.Allreduce(x, out, op=MPI.SUM),
                           lambda: dist.allreduce(fx), lambda: jitted(fx), donate], repeats)
        fresh = slowest_times([lambda: comm.Allreduce(x, np.empty_like(x), op=MPI.SUM)],
                              repeats)
        rows.append((nbytes, t.min(axis=1), float(fresh.min()),
                     np.median(t[0] / t[1:], axis=1)))
    return rows


def resmlp_gradient_bytes():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    import resmlp
    model = resmlp.build_model(64, 10, 96, 2, 2, 0.1, key=fgrad.random.key(0))
    leaves = [x for x in fgrad.tree.leaves(model) if hasattr(x, "dtype")]
    return sum(int(np.prod(x.shape)) * x.dtype.itemsize for x in leaves)


def train_throughput(steps=60, per_rank_batch=32):
    """Samples per second of the example's jitted data-parallel step (digits)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    import resmlp
    from fgrad_nn import distributed as fnd
    config = resmlp.Config(distributed=True, batch_size=per_rank_batch * dist.size())
    x_train, y_train, x_test, y_test = resmlp.load_data("digits", seed=0)
    loader, _ = resmlp.make_loaders(x_train, y_train, x_test, y_test, config.batch_size, 0,
                                    distributed=True)
    model = fnd.broadcast_parameters(resmlp.build_model(64, 10, 96, 2, 2, 0.1,
                                                        key=fgrad.random.key(0)))
    optimizer = resmlp.make_optimizer(1e-3, 1e-4, 10, 1000)
    state = optimizer.init(model)
    step = resmlp.make_train_step(optimizer, distributed=True)
    batches = [b for _ in range(8) for b in loader][:steps + 5]
    key = fgrad.random.key(1)
    for x, y in batches[:5]:                               # compile and warm up
        model, state, loss, _ = step(model, state, x, y, key)
    dist.barrier()
    t = time.perf_counter()
    for x, y in batches[5:]:
        model, state, loss, _ = step(model, state, x, y, key)
    float(loss)
    dist.barrier()
    seconds = time.perf_counter() - t
    return seconds / steps, steps * per_rank_batch * dist.size() / seconds


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--train", action="store_true", help="measure training throughput only")
    p.add_argument("--step-ms", type=float, default=None,
                   help="compute time of one training step (from --train on 1 rank) "
                        "for the scaling estimate")
    args = p.parse_args()
    dist.init()
    main_rank = dist.rank() == 0
    if args.train:
        per_step, rate = train_throughput()
        if main_rank:
            print(f"ResMLP data-parallel step on {dist.size()} rank(s), 32 samples per rank: "
                  f"{per_step * 1e3:.2f} ms per step, {rate:.0f} samples/s")
        return
    rows = bandwidth()
    if main_rank:
        print(f"float32 allreduce-sum on {dist.size()} ranks (seconds: minimum over the "
              f"repeats; GB/s = bytes/time)")
        print("mpi4py: into one reused buffer; new: into a fresh np.empty_like per call; "
              "donated: jit with donate_argnums (in place); x/raw: mpi4py's time over "
              "fgrad's (>= 1: fgrad as fast), from the minima and the median per round")
        print(f"{'bytes':>10} {'mpi4py':>9} {'new':>9} {'fgrad':>9} {'jit':>9} "
              f"{'donated':>9} {'GB/s raw':>8} | {'eager/raw':>9} {'jit/raw':>7} "
              f"{'don/raw':>7} | median: {'eager':>5} {'jit':>5} {'don':>5}")
        for n, (raw, eager, inside, donated), fresh, med in rows:
            print(f"{n:>10} {raw:>9.2e} {fresh:>9.2e} {eager:>9.2e} {inside:>9.2e} "
                  f"{donated:>9.2e} {n / raw / 1e9:>8.2f} | {raw / eager:>9.2f} "
                  f"{raw / inside:>7.2f} {raw / donated:>7.2f} |         "
                  f"{med[0]:>5.2f} {med[1]:>5.2f} {med[2]:>5.2f}")
        # latency a: the smallest message's time; per-byte b: slope over >= 1 MB
        alpha = rows[0][1][0]
        big = [(r[0], r[1][0]) for r in rows if r[0] >= 2 ** 20]
        beta = np.polyfit([b[0] for b in big], [b[1] for b in big], 1)[0]
        print(f"\nloopback: a = {alpha * 1e6:.1f} us (1 KB allreduce), "
              f"b = {beta * 1e9:.3f} ns/byte ({1 / beta / 1e9:.2f} GB/s)")
        grad_bytes = resmlp_gradient_bytes()
        net_beta = 8 / 25e9
        print(f"ResMLP gradient: {grad_bytes} bytes; ring allreduce at 25 Gb/s "
              f"(b = {net_beta * 1e9:.2f} ns/byte) with a = {alpha * 1e6:.1f} us (this "
              f"machine's loopback latency; a real network's is larger, often 2-20 us)")
        if args.step_ms:
            print("\n".join(estimate(grad_bytes, max(alpha, 0.0), net_beta, args.step_ms / 1e3)))


def estimate(grad_bytes, alpha, beta, step_seconds):
    """Efficiency of weak scaling: compute / (compute + ring allreduce), no overlap."""
    lines = []
    for p in (8, 64, 512):
        comm = 2 * (p - 1) * alpha + 2 * (p - 1) / p * grad_bytes * beta
        efficiency = step_seconds / (step_seconds + comm)
        lines.append(f"  {p:>4} ranks: allreduce {comm * 1e3:.3f} ms, step "
                     f"{step_seconds * 1e3:.2f} ms -> efficiency {efficiency:.1%}")
    return lines


if __name__ == "__main__":
    main()
